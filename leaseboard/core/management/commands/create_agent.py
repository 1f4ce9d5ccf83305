"""`manage.py create_agent NAME`: create an agent and print its token once."""

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from leaseboard.core.services.executors import agent_create
from leaseboard.domain.errors import LeaseboardError


class Command(BaseCommand):
    help = "Create an agent executor and print its bearer token (shown only once)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name")

    def handle(self, *args: Any, name: str, **options: Any) -> None:
        try:
            executor, token = agent_create(name=name)
        except LeaseboardError as exc:
            raise CommandError(exc.detail) from None
        self.stderr.write(f"agent {executor.name!r} created (id {executor.id}); token follows:")
        self.stdout.write(token)
