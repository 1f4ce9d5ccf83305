"""`manage.py user_role USERNAME [--add ROLE]... [--remove ROLE]... [--reason TEXT]`:
change a dashboard user's roles explicitly, through the same audited service as the People
page, by `cli:<OS user>`. Under four-eyes an added role is a proposal a second admin decides
(a removal applies at once). With neither flag, print the user's roles."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from leaseboard.core.services.audit import cli_actor_name
from leaseboard.domain.errors import LeaseboardError
from leaseboard.policy.services.common import SettingsInvalid, cli_actor
from leaseboard.policy.services.people import ROLE_NAMES, person_snapshot, person_update


class Command(BaseCommand):
    help = "Add or remove a user's roles (operator, approver, manager, admin); audited."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--add", action="append", default=[], choices=ROLE_NAMES)
        parser.add_argument("--remove", action="append", default=[], choices=ROLE_NAMES)
        parser.add_argument("--reason", default="", help="recorded in the audit log")

    def handle(self, *args: Any, **opts: Any) -> None:
        username = opts["username"]
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        overlap = sorted(set(opts["add"]) & set(opts["remove"]))
        if overlap:
            raise CommandError(f"role {overlap[0]!r} is both added and removed")
        before = person_snapshot(user)
        roles = sorted((set(before["roles"]) | set(opts["add"])) - set(opts["remove"]))
        try:
            change = person_update(
                username=username,
                roles=roles,
                break_glass=before["break_glass"],
                active=before["active"],
                actor=cli_actor(cli_actor_name()),
                reason=opts["reason"],
            )
        except SettingsInvalid as exc:
            raise CommandError("; ".join(f"{k}: {v}" for k, v in exc.errors.items())) from None
        except LeaseboardError as exc:
            raise CommandError(exc.detail) from None
        after = person_snapshot(user)
        shown = ", ".join(after["roles"]) or "(none)"
        if not change.changed:
            self.stdout.write(f"user {username}: roles unchanged: {shown}")
            return
        self.stdout.write(
            f"user {username}: roles {', '.join(before['roles']) or '(none)'} -> {shown}"
        )
        if change.proposal is not None:
            self.stdout.write(
                f"change {change.proposal.pk} ({change.proposal.summary}) waits for a second "
                "admin (four-eyes): /settings/changes/"
            )
