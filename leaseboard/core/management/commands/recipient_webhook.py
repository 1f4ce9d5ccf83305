"""`manage.py recipient_webhook set NAME URL` registers the recipient's epoch-advance
webhook and prints its new signing secret once; `manage.py recipient_webhook clear NAME`
stops the notices. Both audited."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from leaseboard.core.management.secret_command import SecretCommand
from leaseboard.core.services.recipients import recipient_webhook_clear, recipient_webhook_set


class Command(SecretCommand):
    help = (
        "Register (set NAME URL: prints the signing secret once) or remove (clear NAME) a "
        "recipient's webhook, told (work key, new epoch) whenever a grant raises an epoch."
    )
    actions = ("set", "clear")
    whose = "recipient"

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("url", nargs="?", default="", help="for set: http(s)://…")

    # deliberate: SecretCommand's two hooks, alike in shape in every command that fills them
    # (agent_token, recipient_token, recipient_webhook): each calls its own service and says
    # its own words; the shared part (arguments, printing, errors) is SecretCommand's.
    def issue(self, name: str, actor_name: str, **options: Any) -> tuple[str, str]:
        url = options["url"]
        if not url:
            raise CommandError("set needs the webhook URL")
        secret = recipient_webhook_set(name=name, url=url, actor_name=actor_name)
        note = (
            f"recipient {name!r}: epoch notices go to {url}; signing secret follows "
            "(shown only once)"
        )
        return note, secret

    def withdraw(self, name: str, actor_name: str, **options: Any) -> str:
        if recipient_webhook_clear(name=name, actor_name=actor_name):
            return f"recipient {name!r}: webhook removed"
        return f"recipient {name!r} has no webhook: nothing to remove"
