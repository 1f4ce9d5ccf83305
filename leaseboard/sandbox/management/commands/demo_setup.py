"""`manage.py demo_setup`: idempotent demo data — role users, queues, agents, and the
payments sandbox's recipient credential.

Re-running keeps what exists (passwords and tokens stay valid); only missing pieces are
created. Tokens are written under DATA_DIR/demo and never printed.
"""

from __future__ import annotations

import json
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from leaseboard.core.models import Executor, Queue, Recipient
from leaseboard.core.models.executors import hash_token
from leaseboard.core.services.executors import (
    agent_create,
    agent_rotate_token_locked,
    agent_scope_change,
)
from leaseboard.core.services.recipients import recipient_create, recipient_token_rotate
from leaseboard.domain.authority import ROLE_NAMES
from leaseboard.domain.policy import RuleSpec
from leaseboard.policy.services.common import cli_actor
from leaseboard.policy.services.display_hints import display_hints_checked, display_hints_replace
from leaseboard.policy.services.queues import queue_create, queue_snapshot, queue_update
from leaseboard.policy.services.rules import rule_set_change
from leaseboard.sandbox import demo
from leaseboard.sandbox.fence import TOKEN_FILE


class Command(BaseCommand):
    help = (
        "Create (or keep) the demo's users, queues, agents and the payments sandbox's "
        "recipient credential."
    )

    def add_arguments(self, parser):
        parser.add_argument("--agents", type=int, default=demo.DEFAULT_AGENTS)

    def handle(self, *args, agents: int, **options):
        if not 1 <= agents <= demo.MAX_AGENTS:
            raise CommandError(f"--agents must be between 1 and {demo.MAX_AGENTS}")
        users = self._users()
        self._queues()
        tokens = demo.read_secret_json(demo.agents_file())
        sandbox_file = demo.demo_dir() / TOKEN_FILE
        saved = sandbox_file.read_text().strip() if sandbox_file.exists() else None
        names = [f"{demo.AGENT_PREFIX}{i}" for i in range(1, agents + 1)]
        created = 0
        for index, name in enumerate(names):
            token, new = self._agent_token(name, tokens.get(name), demo.agent_queues(index))
            tokens[name] = token
            created += new
        sandbox_token = self._recipient_token(demo.SANDBOX_RECIPIENT, saved)
        demo.write_secret(demo.agents_file(), json.dumps(tokens, indent=1, sort_keys=True))
        demo.write_secret(sandbox_file, sandbox_token + "\n")

        out = self.stdout
        out.write(f"Demo sign-in (dashboard), kept in {demo.users_file()}:")
        for role, (username, password) in users.items():
            out.write(f"  {role:<9} {username} / {password}")
        out.write(
            f"Demo agents: {len(names)} ({created} new token(s)); tokens in "
            f"{demo.agents_file()}, sandbox recipient credential in {sandbox_file}"
        )

    def _users(self) -> dict[str, tuple[str, str]]:
        # The dashboard's migration creates these groups; get_or_create keeps us independent.
        saved = demo.read_secret_json(demo.users_file())
        user_model = get_user_model()
        users: dict[str, tuple[str, str]] = {}
        for role in ROLE_NAMES:  # the demo user holds every role
            username = f"demo-{role}"
            with transaction.atomic():
                group, _ = Group.objects.get_or_create(name=role)
                user, new = user_model.objects.get_or_create(username=username)
                password = saved.get(username)
                if new or not password or not user.check_password(password):
                    password = secrets.token_urlsafe(9)
                    user.set_password(password)
                    user.is_active = True
                    user.save()
                user.groups.add(group)
            saved[username] = password
            users[role] = (username, password)
        demo.write_secret(demo.users_file(), json.dumps(saved, indent=1, sort_keys=True))
        return users

    def _queues(self) -> None:
        # Through the audited services, as an admin would on the settings pages.
        actor = cli_actor("demo_setup")
        for name, spec in demo.QUEUES.items():
            queue = Queue.objects.filter(name=name).first()
            if queue is None:
                queue_create(name=name, values={"timing": spec["timing"]}, actor=actor)
            else:
                values = {**queue_snapshot(queue), "timing": spec["timing"]}
                queue_update(name=name, values=values, actor=actor)
            rules = [RuleSpec(n, kind, when=when, decision=d) for n, kind, when, d in spec["rules"]]
            rule_set_change(queue_name=name, rules=rules, default=spec["default"], actor=actor)
        display_hints_replace(display_hints_checked(demo.EFFECT_KINDS), actor=actor)

    def _agent_token(self, name: str, token: str | None, queues: list[str]) -> tuple[str, bool]:
        """A working token for agent `name`, which may use `queues` only: the saved one, a
        rotated one, or a new agent."""
        executor = Executor.objects.filter(name=name).first()
        if executor is None:
            return agent_create(name=name, queues=queues, actor_name="demo_setup")[1], True
        if executor.kind != Executor.Kind.AGENT:
            raise CommandError(f"{name!r} exists and is not an agent")
        agent_scope_change(name=name, queues=queues, actor_name="demo_setup")
        if token and executor.token_hash == hash_token(token):
            return token, False
        with transaction.atomic():
            locked = Executor.objects.select_for_update().get(pk=executor.pk)
            return agent_rotate_token_locked(locked), True

    def _recipient_token(self, name: str, token: str | None) -> str:
        """A working credential for recipient `name`: the saved one, a rotated one, or new."""
        recipient = Recipient.objects.filter(name=name).first()
        if recipient is None:
            return recipient_create(name=name, actor_name="demo_setup")[1]
        if token and recipient.token_hash == hash_token(token):
            return token
        return recipient_token_rotate(name=name, actor_name="demo_setup")[1]
