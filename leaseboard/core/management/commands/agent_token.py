"""`manage.py agent_token rotate NAME` (prints the new token once) and
`manage.py agent_token revoke NAME`. Both audited; the old token stops working at once in
this process and within LEASEBOARD_TOKEN_CACHE_SECONDS in the others (docs/audit.md)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from leaseboard.core.services.audit import cli_actor_name
from leaseboard.core.services.executors import agent_token_revoke, agent_token_rotate
from leaseboard.domain.errors import LeaseboardError


class Command(BaseCommand):
    help = "Rotate (new token, printed once) or revoke an agent's bearer token."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["rotate", "revoke"])
        parser.add_argument("name", help="the agent's name")

    def handle(self, *args: Any, action: str, name: str, **options: Any) -> None:
        bound = settings.LEASEBOARD_TOKEN_CACHE_SECONDS
        try:
            if action == "rotate":
                executor, token = agent_token_rotate(name=name, actor_name=cli_actor_name())
                self.stderr.write(
                    f"agent {executor.name!r}: new token follows (shown only once); the old "
                    f"one is refused within {bound:g} s everywhere"
                )
                self.stdout.write(token)
                return
            if agent_token_revoke(name=name, actor_name=cli_actor_name()):
                self.stdout.write(
                    f"agent {name!r}: token revoked; refused within {bound:g} s everywhere "
                    f"(`agent_token rotate {name}` issues a new one)"
                )
            else:
                self.stdout.write(f"agent {name!r} has no token: nothing to revoke")
        except LeaseboardError as exc:
            raise CommandError(exc.detail) from None
