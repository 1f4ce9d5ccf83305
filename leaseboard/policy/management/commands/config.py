"""`manage.py config export [FILE]` and `manage.py config apply FILE [--dry-run]`.

export writes four-eyes, the rules for every queue, queues, envelopes, rules and people's
roles as TOML (to stdout without FILE). apply prints the difference, then applies it in one
audited transaction (nothing with --dry-run; nothing at all when any part is refused: each
problem is printed under its path). Four-eyes is the database's setting, as on the settings
pages: what they would propose, apply proposes (no variable of this process turns it off).
Applying the same file again changes nothing."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from leaseboard.core.dbfaults import long_bounds
from leaseboard.core.services.audit import cli_actor_name
from leaseboard.domain.errors import LeaseboardError
from leaseboard.policy.services.common import SettingsInvalid, cli_actor
from leaseboard.policy.services.config import (
    config_apply_text,
    config_dumps,
    config_export,
)


class Command(BaseCommand):
    help = "Export or apply the configuration (queues, envelopes, rules, roles) as TOML."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        export = sub.add_parser("export", help="write the configuration as TOML")
        export.add_argument("file", nargs="?", help="default: standard output")
        apply = sub.add_parser("apply", help="show the difference and apply it")
        apply.add_argument("file", help="a TOML file ('-' reads standard input)")
        apply.add_argument("--dry-run", action="store_true", help="show, change nothing")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["action"] == "export":
            # One transaction: a consistent read, under the long statement bounds (an
            # export is no hot path).
            with transaction.atomic():
                long_bounds()
                text = config_dumps(config_export())
            if opts["file"]:
                Path(opts["file"]).write_text(text)
                self.stderr.write(f"wrote {opts['file']}")
            else:
                self.stdout.write(text, ending="")
            return
        source = opts["file"]
        try:
            text = sys.stdin.read() if source == "-" else Path(source).read_text()
        except OSError as exc:
            raise CommandError(f"{source}: {exc.strerror}") from None
        try:
            applied = config_apply_text(
                text, actor=cli_actor(cli_actor_name()), dry_run=opts["dry_run"], source=source
            )
        except SettingsInvalid as exc:
            for field, message in exc.errors.items():
                self.stderr.write(f"{field}: {message}")
            raise CommandError(f"{source}: {len(exc.errors)} problem(s); nothing applied") from None
        except LeaseboardError as exc:
            raise CommandError(f"{source}: {exc.detail}; nothing applied") from None
        plan = applied.plan
        self.stdout.write(plan.text())
        if plan.untouched:
            self.stdout.write(f"(not in the file, left as they are: {', '.join(plan.untouched)})")
        if not plan.changes:
            return
        if opts["dry_run"]:
            self.stdout.write(f"dry run: {len(plan.changes)} change(s), nothing applied")
            return
        self.stdout.write(f"applied {len(plan.changes)} change(s) in one audited transaction")
        for pk, what in applied.proposals:
            self.stdout.write(
                f"change {pk} ({what}) waits for a second admin (four-eyes): /settings/changes/"
            )
