"""`manage.py agent_queues NAME --queue Q [--queue Q2 ...] | --all-queues`: set the queues an
agent may use. Audited as `agent.scope_change` by `cli:<OS user>`; applies to the agent's
next admit, acquire and effect (within LEASEBOARD_TOKEN_CACHE_SECONDS everywhere)."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from leaseboard.core.management.commands.create_agent import add_scope_arguments
from leaseboard.core.services.audit import cli_actor_name
from leaseboard.core.services.executors import agent_scope_change
from leaseboard.domain.errors import LeaseboardError


class Command(BaseCommand):
    help = "Set the queues an agent may admit work to and work in."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name")
        add_scope_arguments(parser)

    def handle(self, *args: Any, name: str, **options: Any) -> None:
        try:
            changed = agent_scope_change(
                name=name,
                queues=options["queues"],
                all_queues=options["all_queues"],
                actor_name=cli_actor_name(),
            )
        except LeaseboardError as exc:
            raise CommandError(exc.detail) from None
        self.stdout.write(f"agent {name!r}: queues {'saved' if changed else 'unchanged'}")
