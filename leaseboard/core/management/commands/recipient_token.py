"""`manage.py recipient_token rotate NAME` (prints the new credential once) and
`manage.py recipient_token revoke NAME`. Both audited; the old credential is refused from
the commit on (recipient credentials are not cached)."""

from __future__ import annotations

from typing import Any

from leaseboard.core.management.secret_command import SecretCommand
from leaseboard.core.services.recipients import recipient_token_revoke, recipient_token_rotate


class Command(SecretCommand):
    help = "Rotate (new credential, printed once) or revoke a recipient's credential."
    actions = ("rotate", "revoke")
    whose = "recipient"

    # deliberate: SecretCommand's two hooks, alike in shape in every command that fills them
    # (agent_token, recipient_token, recipient_webhook): each calls its own service and says
    # its own words; the shared part (arguments, printing, errors) is SecretCommand's.
    def issue(self, name: str, actor_name: str, **options: Any) -> tuple[str, str]:
        recipient, token = recipient_token_rotate(name=name, actor_name=actor_name)
        note = (
            f"recipient {recipient.name!r}: new credential follows (shown only once); "
            "the old one is refused from now on"
        )
        return note, token

    def withdraw(self, name: str, actor_name: str, **options: Any) -> str:
        if recipient_token_revoke(name=name, actor_name=actor_name):
            return f"recipient {name!r}: credential revoked"
        return f"recipient {name!r} has no credential: nothing to revoke"
