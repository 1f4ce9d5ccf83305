"""`manage.py create_user USERNAME --role operator|approver|manager [--password ...]`.

Creates a new user only (an existing one is refused: roles change with `manage.py
user_role`). The password must pass AUTH_PASSWORD_VALIDATORS; without one a random
password is generated and printed once. Audited as `user.create`.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from leaseboard.core.services.audit import cli_actor_name
from leaseboard.core.services.users import user_create
from leaseboard.domain.errors import LeaseboardError
from leaseboard.web.roles import ROLES


class Command(BaseCommand):
    help = "Create a dashboard user in one or more roles (never modifies an existing user)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--role", action="append", required=True, choices=ROLES, help="repeat for several"
        )
        parser.add_argument("--password", help="default: a random one, printed once")
        parser.add_argument("--email", default="")

    def handle(self, *args: Any, **opts: Any) -> None:
        password = opts["password"]
        generated = password is None
        if generated:
            password = secrets.token_urlsafe(16)
        try:
            user = user_create(
                username=opts["username"],
                password=password,
                roles=opts["role"],
                email=opts["email"],
                actor_name=cli_actor_name(),
            )
        except LeaseboardError as exc:
            raise CommandError(exc.detail) from None
        roles = ", ".join(sorted(set(opts["role"])))
        self.stdout.write(f"created user {user.get_username()} with role {roles}")
        if generated:
            self.stdout.write(f"password: {password}")
