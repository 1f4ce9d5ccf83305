"""Agent and recipient credentials from the settings pages: create (the token shown once),
rotate (a new token, shown once), revoke (no token at all), and a recipient's epoch-notice
webhook (set — its signing secret shown once — or cleared). Each is core's audited service
(before -> after, in the change's transaction), asked of the authority first:
Act.MANAGE_CREDENTIALS, or Act.MANAGE_WEBHOOKS for the webhook (a notification target).

Quarantine is not here: it is one core act (core/services/supervision.py: credential off
and every live lease revoked, with a reason), taken on the agent's page by an operator or
approver. A recipient holds no leases; revoking its token is all there is to it."""

from __future__ import annotations

from leaseboard.core.authority import Actor, authorize
from leaseboard.core.models import Executor, Recipient
from leaseboard.core.services import recipients
from leaseboard.core.services.executors import (
    agent_create,
    agent_scope_change,
    agent_token_revoke,
    agent_token_rotate,
)
from leaseboard.domain.authority import Act


def credential_create(
    *, name: str, queues: list[str] | None = None, all_queues: bool = False, actor: Actor
) -> tuple[Executor, str]:
    """A new agent that may use the named queues (or every queue, said explicitly)."""
    authorize(Act.MANAGE_CREDENTIALS, actor)
    return agent_create(name=name, queues=queues, all_queues=all_queues, actor_name=actor.name)


def credential_scope(
    *, name: str, queues: list[str] | None = None, all_queues: bool = False, actor: Actor
) -> bool:
    authorize(Act.MANAGE_CREDENTIALS, actor)
    return agent_scope_change(
        name=name, queues=queues, all_queues=all_queues, actor_name=actor.name
    )


def credential_rotate(*, name: str, actor: Actor) -> tuple[Executor, str]:
    authorize(Act.MANAGE_CREDENTIALS, actor)
    return agent_token_rotate(name=name, actor_name=actor.name)


def credential_revoke(*, name: str, actor: Actor) -> bool:
    authorize(Act.MANAGE_CREDENTIALS, actor)
    return agent_token_revoke(name=name, actor_name=actor.name)


# -- recipients -------------------------------------------------------------------------


def recipient_credential_create(*, name: str, actor: Actor) -> tuple[Recipient, str]:
    authorize(Act.MANAGE_CREDENTIALS, actor)
    return recipients.recipient_create(name=name, actor_name=actor.name)


def recipient_credential_rotate(*, name: str, actor: Actor) -> tuple[Recipient, str]:
    authorize(Act.MANAGE_CREDENTIALS, actor)
    return recipients.recipient_token_rotate(name=name, actor_name=actor.name)


def recipient_credential_revoke(*, name: str, actor: Actor) -> bool:
    authorize(Act.MANAGE_CREDENTIALS, actor)
    return recipients.recipient_token_revoke(name=name, actor_name=actor.name)


def recipient_webhook_set(*, name: str, url: str, actor: Actor) -> str:
    """The new signing secret (shown once); a bad URL is ValidationFailed(param="url").
    A notification target, like a queue's webhooks: Act.MANAGE_WEBHOOKS."""
    authorize(Act.MANAGE_WEBHOOKS, actor)
    return recipients.recipient_webhook_set(name=name, url=url, actor_name=actor.name)


def recipient_webhook_clear(*, name: str, actor: Actor) -> bool:
    authorize(Act.MANAGE_WEBHOOKS, actor)
    return recipients.recipient_webhook_clear(name=name, actor_name=actor.name)
