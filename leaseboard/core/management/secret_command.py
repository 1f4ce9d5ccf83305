"""The shape of the commands that issue or withdraw a named thing's secret (an agent's
token, a recipient's credential or webhook secret): the first action issues a new one,
printed once on stdout with what it is on stderr; the second withdraws it. Both audited
by the services, under the command line's actor name."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from leaseboard.core.services.audit import cli_actor_name
from leaseboard.domain.errors import LeaseboardError


class SecretCommand(BaseCommand):
    actions: tuple[str, str]  # (issue, withdraw)
    whose: str  # "agent", "recipient"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=list(self.actions))
        parser.add_argument("name", help=f"the {self.whose}'s name")

    def issue(self, name: str, actor_name: str, **options: Any) -> tuple[str, str]:
        """The new secret's note (for stderr) and the secret (for stdout, shown once)."""
        raise NotImplementedError

    def withdraw(self, name: str, actor_name: str, **options: Any) -> str:
        """What was withdrawn (or that there was nothing to withdraw)."""
        raise NotImplementedError

    def handle(self, *args: Any, action: str, name: str, **options: Any) -> None:
        try:
            if action == self.actions[0]:
                note, secret = self.issue(name, cli_actor_name(), **options)
                self.stderr.write(note)
                self.stdout.write(secret)
            else:
                self.stdout.write(self.withdraw(name, cli_actor_name(), **options))
        except LeaseboardError as exc:
            raise CommandError(exc.detail) from None
