"""Agent credentials from the settings pages: create (the token shown once), rotate
(a new token, shown once), revoke (no token at all), quarantine (the token is kept but
refused until released). The first three are core's audited services; quarantine is
here. Every one is asked of the authority first (Act.MANAGE_CREDENTIALS)."""

from __future__ import annotations

from django.db import transaction

from leaseboard.core.authority import Actor, authorize
from leaseboard.core.models import Executor
from leaseboard.core.services.executors import (
    agent_create,
    agent_token_revoke,
    agent_token_rotate,
    token_cache_forget,
)
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import NotFound
from leaseboard.policy.services.common import audited


def credential_create(*, name: str, actor: Actor) -> tuple[Executor, str]:
    authorize(Act.MANAGE_CREDENTIALS, actor)
    return agent_create(name=name, actor_name=actor.name)


def credential_rotate(*, name: str, actor: Actor) -> tuple[Executor, str]:
    authorize(Act.MANAGE_CREDENTIALS, actor)
    return agent_token_rotate(name=name, actor_name=actor.name)


def credential_revoke(*, name: str, actor: Actor) -> bool:
    authorize(Act.MANAGE_CREDENTIALS, actor)
    return agent_token_revoke(name=name, actor_name=actor.name)


@transaction.atomic(durable=True)
def credential_quarantine(
    *, name: str, quarantined: bool, actor: Actor, reason: str = "", request_id: str = ""
) -> bool:
    """Refuse (or accept again) an agent's token without replacing it: for an agent that
    misbehaves while someone looks. Its live leases run out by themselves; revoke them on
    the work item pages to end them now. False when already so."""
    authorize(Act.MANAGE_CREDENTIALS, actor)
    agent = (
        Executor.objects.select_for_update(no_key=True)
        .filter(name=name, kind=Executor.Kind.AGENT)
        .first()
    )
    if agent is None:
        raise NotFound(f"no agent named {name!r}")
    if agent.is_active == (not quarantined):
        return False
    agent.is_active = not quarantined
    agent.save(update_fields=["is_active"])
    audited(
        Act.MANAGE_CREDENTIALS,
        actor,
        action="agent.quarantine" if quarantined else "agent.release",
        object_type="executor",
        object_id=str(agent.id),
        before={"name": name, "quarantined": not quarantined},
        after={"name": name, "quarantined": quarantined},
        reason=reason,
        request_id=request_id,
    )
    transaction.on_commit(token_cache_forget)
    return True
