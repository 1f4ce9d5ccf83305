"""`manage.py agent_queues NAME --queue Q [--queue Q2 ...] | --all-queues`: set the queues an
agent may use. Audited as `agent.scope_change` by `cli:<OS user>`; applies to the agent's
next admit, acquire and effect (within LEASEBOARD_TOKEN_CACHE_SECONDS everywhere)."""

from __future__ import annotations

from typing import Any

from leaseboard.core.management.commands.create_agent import ScopeCommand
from leaseboard.core.services.executors import agent_scope_change


class Command(ScopeCommand):
    help = "Set the queues an agent may admit work to and work in."

    def handle(self, *args: Any, name: str, **options: Any) -> None:
        changed = self.scoped(agent_scope_change, name, options)
        self.stdout.write(f"agent {name!r}: queues {'saved' if changed else 'unchanged'}")
