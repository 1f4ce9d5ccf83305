"""`manage.py agent_token rotate NAME` (prints the new token once) and
`manage.py agent_token revoke NAME`. Both audited; the old token stops working at once in
this process and within LEASEBOARD_TOKEN_CACHE_SECONDS in the others (docs/audit.md)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from leaseboard.core.management.secret_command import SecretCommand
from leaseboard.core.services.executors import agent_token_revoke, agent_token_rotate


class Command(SecretCommand):
    help = "Rotate (new token, printed once) or revoke an agent's bearer token."
    actions = ("rotate", "revoke")
    whose = "agent"

    def issue(self, name: str, actor_name: str, **options: Any) -> tuple[str, str]:
        bound = settings.LEASEBOARD_TOKEN_CACHE_SECONDS
        executor, token = agent_token_rotate(name=name, actor_name=actor_name)
        note = (
            f"agent {executor.name!r}: new token follows (shown only once); the old "
            f"one is refused within {bound:g} s everywhere"
        )
        return note, token

    def withdraw(self, name: str, actor_name: str, **options: Any) -> str:
        bound = settings.LEASEBOARD_TOKEN_CACHE_SECONDS
        if agent_token_revoke(name=name, actor_name=actor_name):
            return (
                f"agent {name!r}: token revoked; refused within {bound:g} s everywhere "
                f"(`agent_token rotate {name}` issues a new one)"
            )
        return f"agent {name!r} has no token: nothing to revoke"
