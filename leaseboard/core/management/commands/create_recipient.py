"""`manage.py create_recipient NAME`: create a recipient and print its credential once."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from leaseboard.core.services.audit import cli_actor_name
from leaseboard.core.services.recipients import recipient_create
from leaseboard.domain.errors import LeaseboardError


class Command(BaseCommand):
    help = (
        "Create a recipient (a service that receives effects) and print its credential "
        "(shown only once): it files refusal reports and asks POST /api/v1/fencing/check."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")

    def handle(self, *args: Any, name: str, **options: Any) -> None:
        try:
            recipient, token = recipient_create(name=name, actor_name=cli_actor_name())
        except LeaseboardError as exc:
            raise CommandError(exc.detail) from None
        self.stderr.write(
            f"recipient {recipient.name!r} created (id {recipient.id}); credential follows:"
        )
        self.stdout.write(token)
