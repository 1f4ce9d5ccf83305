"""`manage.py create_agent NAME --queue Q [--queue Q2 ...] | --all-queues`: create an agent
that may use the named queues (every queue only with --all-queues) and print its token
once. Audited as `agent.create` by `cli:<OS user>`."""

from __future__ import annotations

from argparse import ArgumentParser
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.management.base import BaseCommand, CommandError

from leaseboard.core.services.audit import cli_actor_name
from leaseboard.core.services.executors import agent_create
from leaseboard.domain.errors import LeaseboardError

T = TypeVar("T")


class ScopeCommand(BaseCommand):
    """A command about one agent and the queues it may use (create_agent, agent_queues):
    NAME and either --queue (repeated) or --all-queues, handed to an executors service
    under the command line's actor name; a refusal is the command's error."""

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name")
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

    def scoped(self, service: Callable[..., T], name: str, options: dict[str, Any]) -> T:
        try:
            return service(
                name=name,
                queues=options["queues"],
                all_queues=options["all_queues"],
                actor_name=cli_actor_name(),
            )
        except LeaseboardError as exc:
            raise CommandError(exc.detail) from None


class Command(ScopeCommand):
    help = "Create an agent executor and print its bearer token (shown only once)."

    def handle(self, *args: Any, name: str, **options: Any) -> None:
        executor, token = self.scoped(agent_create, name, options)
        where = "every queue" if executor.all_queues else ", ".join(executor.queues)
        self.stderr.write(
            f"agent {executor.name!r} created (id {executor.id}), may use {where}; token follows:"
        )
        self.stdout.write(token)
