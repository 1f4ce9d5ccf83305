"""`manage.py create_user USERNAME --role operator|approver|manager [--password ...]`."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from leaseboard.web.roles import ROLES


class Command(BaseCommand):
    help = "Create a dashboard user in a role (or add the role to an existing user)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--role", action="append", required=True, choices=ROLES, help="repeat for several"
        )
        parser.add_argument("--password", help="default: a random one, printed once")
        parser.add_argument("--email", default="")

    def handle(self, *args: Any, **opts: Any) -> None:
        username: str = opts["username"].strip()
        if not username or len(username) > 150:
            raise CommandError("a username is 1 to 150 characters")
        User = get_user_model()
        password = opts["password"]
        generated = False
        with transaction.atomic():
            groups = list(Group.objects.filter(name__in=opts["role"]))
            if len(groups) != len(set(opts["role"])):
                raise CommandError("role groups are missing; run `manage.py migrate` first")
            user, created = User.objects.get_or_create(
                username=username, defaults={"email": opts["email"]}
            )
            if created and not password:
                password = secrets.token_urlsafe(12)
                generated = True
            if password:
                user.set_password(password)
                user.save()
            user.groups.add(*groups)
        roles = ", ".join(sorted(g.name for g in groups))
        verb = "created" if created else "updated"
        self.stdout.write(f"{verb} user {username} with role {roles}")
        if generated:
            self.stdout.write(f"password: {password}")
