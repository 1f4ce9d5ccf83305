"""`manage.py create_agent NAME --queue Q [--queue Q2 ...] | --all-queues`: create an agent
that may use the named queues (every queue only with --all-queues) and print its token
once. Audited as `agent.create` by `cli:<OS user>`."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from leaseboard.core.services.audit import cli_actor_name
from leaseboard.core.services.executors import agent_create
from leaseboard.domain.errors import LeaseboardError


def add_scope_arguments(parser: ArgumentParser) -> None:
    scope = parser.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "--queue",
        action="append",
        dest="queues",
        metavar="QUEUE",
        help="a queue it may admit work to and work in (repeat for several)",
    )
    scope.add_argument(
        "--all-queues",
        action="store_true",
        help="every queue, including queues made later (say so only when you mean it)",
    )


class Command(BaseCommand):
    help = "Create an agent executor and print its bearer token (shown only once)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name")
        add_scope_arguments(parser)

    def handle(self, *args: Any, name: str, **options: Any) -> None:
        try:
            executor, token = agent_create(
                name=name,
                queues=options["queues"],
                all_queues=options["all_queues"],
                actor_name=cli_actor_name(),
            )
        except LeaseboardError as exc:
            raise CommandError(exc.detail) from None
        where = "every queue" if executor.all_queues else ", ".join(executor.queues)
        self.stderr.write(
            f"agent {executor.name!r} created (id {executor.id}), may use {where}; token follows:"
        )
        self.stdout.write(token)
