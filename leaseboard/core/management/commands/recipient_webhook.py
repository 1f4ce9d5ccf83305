"""`manage.py recipient_webhook set NAME URL` registers the recipient's epoch-advance
webhook and prints its new signing secret once; `manage.py recipient_webhook clear NAME`
stops the notices. Both audited."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from leaseboard.core.services.audit import cli_actor_name
from leaseboard.core.services.recipients import recipient_webhook_clear, recipient_webhook_set
from leaseboard.domain.errors import LeaseboardError


class Command(BaseCommand):
    help = (
        "Register (set NAME URL: prints the signing secret once) or remove (clear NAME) a "
        "recipient's webhook, told (work key, new epoch) whenever a grant raises an epoch."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["set", "clear"])
        parser.add_argument("name", help="the recipient's name")
        parser.add_argument("url", nargs="?", default="", help="for set: http(s)://…")

    def handle(self, *args: Any, action: str, name: str, url: str, **options: Any) -> None:
        try:
            if action == "set":
                if not url:
                    raise CommandError("set needs the webhook URL")
                secret = recipient_webhook_set(name=name, url=url, actor_name=cli_actor_name())
                self.stderr.write(
                    f"recipient {name!r}: epoch notices go to {url}; signing secret follows "
                    "(shown only once)"
                )
                self.stdout.write(secret)
                return
            if recipient_webhook_clear(name=name, actor_name=cli_actor_name()):
                self.stdout.write(f"recipient {name!r}: webhook removed")
            else:
                self.stdout.write(f"recipient {name!r} has no webhook: nothing to remove")
        except LeaseboardError as exc:
            raise CommandError(exc.detail) from None
