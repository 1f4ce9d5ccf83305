"""`manage.py user_role USERNAME [--add ROLE]... [--remove ROLE]... [--reason TEXT]`:
change a dashboard user's roles explicitly; every change is audited. With neither flag,
print the user's roles."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from leaseboard.core.services.audit import cli_actor_name
from leaseboard.core.services.users import ROLE_NAMES, user_roles_change
from leaseboard.domain.errors import LeaseboardError


class Command(BaseCommand):
    help = "Add or remove a user's roles (operator, approver, manager); audited."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--add", action="append", default=[], choices=ROLE_NAMES)
        parser.add_argument("--remove", action="append", default=[], choices=ROLE_NAMES)
        parser.add_argument("--reason", default="", help="recorded in the audit log")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            before, after = user_roles_change(
                username=opts["username"],
                add=opts["add"],
                remove=opts["remove"],
                actor_name=cli_actor_name(),
                reason=opts["reason"],
            )
        except LeaseboardError as exc:
            raise CommandError(exc.detail) from None
        shown = ", ".join(after) or "(none)"
        if before == after:
            self.stdout.write(f"user {opts['username']}: roles unchanged: {shown}")
        else:
            self.stdout.write(
                f"user {opts['username']}: roles {', '.join(before) or '(none)'} -> {shown}"
            )
