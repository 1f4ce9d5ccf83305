"""`manage.py recipient_token rotate NAME` (prints the new credential once) and
`manage.py recipient_token revoke NAME`. Both audited; the old credential is refused from
the commit on (recipient credentials are not cached)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from leaseboard.core.services.audit import cli_actor_name
from leaseboard.core.services.recipients import recipient_token_revoke, recipient_token_rotate
from leaseboard.domain.errors import LeaseboardError


class Command(BaseCommand):
    help = "Rotate (new credential, printed once) or revoke a recipient's credential."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["rotate", "revoke"])
        parser.add_argument("name", help="the recipient's name")

    def handle(self, *args: Any, action: str, name: str, **options: Any) -> None:
        try:
            if action == "rotate":
                recipient, token = recipient_token_rotate(name=name, actor_name=cli_actor_name())
                self.stderr.write(
                    f"recipient {recipient.name!r}: new credential follows (shown only once); "
                    "the old one is refused from now on"
                )
                self.stdout.write(token)
                return
            if recipient_token_revoke(name=name, actor_name=cli_actor_name()):
                self.stdout.write(f"recipient {name!r}: credential revoked")
            else:
                self.stdout.write(f"recipient {name!r} has no credential: nothing to revoke")
        except LeaseboardError as exc:
            raise CommandError(exc.detail) from None
