"""`manage.py create_user USERNAME --role ROLE [--role ROLE ...] [--email E] [--password P]`.

Creates a new user only (an existing one is refused: roles change with `manage.py
user_role`), through the same audited service as the People page, by `cli:<OS user>`.
Without --password it prints a one-time set-password link (LEASEBOARD_PUBLIC_URL) for the
person to choose their own; --password is for your own account, and must pass
AUTH_PASSWORD_VALIDATORS. Under four-eyes the new person is a proposal a second admin
decides, except while fewer than two active admins exist (the installation's first admins
are made from the shell).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from leaseboard.core.services.audit import cli_actor_name
from leaseboard.domain.errors import LeaseboardError
from leaseboard.policy.services.common import SettingsInvalid, cli_actor
from leaseboard.policy.services.people import ROLE_NAMES, person_create


class Command(BaseCommand):
    help = "Create a dashboard user in one or more roles (never modifies an existing user)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--role", action="append", required=True, choices=ROLE_NAMES, help="repeat for several"
        )
        parser.add_argument(
            "--password", help="your own account's; default: print a one-time set-password link"
        )
        parser.add_argument("--email", default="")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            new = person_create(
                username=opts["username"],
                roles=opts["role"],
                email=opts["email"],
                password=opts["password"],
                actor=cli_actor(cli_actor_name()),
            )
        except SettingsInvalid as exc:
            raise CommandError("; ".join(f"{k}: {v}" for k, v in exc.errors.items())) from None
        except LeaseboardError as exc:
            raise CommandError(exc.detail) from None
        roles = ", ".join(sorted(set(opts["role"])))
        if new.proposal is not None:
            self.stdout.write(
                f"change {new.proposal.pk} ({new.proposal.what}, role {roles}) waits for a "
                "second admin (four-eyes): /settings/changes/"
            )
            return
        assert new.user is not None
        self.stdout.write(f"created user {new.user.get_username()} with role {roles}")
        if new.link:
            self.stdout.write(f"one-time set-password link (hand it to them only): {new.link}")
