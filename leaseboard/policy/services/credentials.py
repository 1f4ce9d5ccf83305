"""Agent credentials from the settings pages: create (the token shown once), rotate
(a new token, shown once), revoke (no token at all) — core's audited services, each asked
of the authority first (Act.MANAGE_CREDENTIALS). Quarantine is not here: it is one core
act (core/services/supervision.py: credential off and every live lease revoked, with a
reason), taken on the agent's page by an operator or approver."""

from __future__ import annotations

from leaseboard.core.authority import Actor, authorize
from leaseboard.core.models import Executor
from leaseboard.core.services.executors import (
    agent_create,
    agent_token_revoke,
    agent_token_rotate,
)
from leaseboard.domain.authority import Act


def credential_create(*, name: str, actor: Actor) -> tuple[Executor, str]:
    authorize(Act.MANAGE_CREDENTIALS, actor)
    return agent_create(name=name, actor_name=actor.name)


def credential_rotate(*, name: str, actor: Actor) -> tuple[Executor, str]:
    authorize(Act.MANAGE_CREDENTIALS, actor)
    return agent_token_rotate(name=name, actor_name=actor.name)


def credential_revoke(*, name: str, actor: Actor) -> bool:
    authorize(Act.MANAGE_CREDENTIALS, actor)
    return agent_token_revoke(name=name, actor_name=actor.name)
