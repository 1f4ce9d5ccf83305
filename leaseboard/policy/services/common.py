"""What the configuration services share: field errors, the audit call, the clock."""

from __future__ import annotations

from typing import Any

from leaseboard.core.authority import Actor
from leaseboard.core.clock import db_now_ms
from leaseboard.core.services.audit import audit_act
from leaseboard.domain.authority import Act, Role
from leaseboard.domain.errors import ValidationFailed


class SettingsInvalid(ValidationFailed):
    """One or more fields cannot be saved ({field: message}); nothing was saved."""

    def __init__(self, errors: dict[str, str]) -> None:
        field, message = next(iter(errors.items()))
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(f"{field}: {message}{more}", param=field, errors=errors)
        self.errors = errors


def audited(
    act: Act,
    actor: Actor,
    *,
    action: str,
    object_type: str,
    object_id: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    reason: str = "",
    request_id: str = "",
) -> None:
    # deliberate: audit_act's keywords one a line; policy's acts read the clock here, at the write.
    audit_act(
        act=act,
        actor=actor,
        action=action,
        object_type=object_type,
        object_id=object_id,
        at_ms=db_now_ms(),
        before=before,
        after=after,
        reason=reason,
        request_id=request_id,
    )


def cli_actor(name: str) -> Actor:
    """Whoever runs a management command: an admin by virtue of the shell (they could run
    any code), recorded by name ("cli:<OS user>")."""
    return Actor(kind="human", name=name, roles=frozenset({Role.ADMIN}))
