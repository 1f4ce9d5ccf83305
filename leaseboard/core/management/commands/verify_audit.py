"""`manage.py verify_audit`: check the keyed audit chain and the signed checkpoints; exit 1
with one line per problem if anything is broken (docs/audit.md)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from leaseboard.core.services.audit import audit_checkpoint_location, audit_verify

MAX_LINES = 200


class Command(BaseCommand):
    help = (
        "Verify the audit log: every entry's MAC with the audit keys, the chain's links, "
        "and the log against the newest signed checkpoint (edits, rewrites, deleted tails "
        "and truncation all fail)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        verdict = audit_verify()
        for line in verdict.problems[:MAX_LINES]:
            self.stderr.write(line)
        if len(verdict.problems) > MAX_LINES:
            self.stderr.write(f"... and {len(verdict.problems) - MAX_LINES} more")
        if verdict.problems:
            raise CommandError(
                f"audit chain broken: {len(verdict.problems)} problem(s) in {verdict.count} entries"
            )
        if verdict.newest is None:
            self.stderr.write(
                f"note: no signed checkpoint in {audit_checkpoint_location()}; a deleted tail "
                "or truncation is only detectable after `manage.py audit_checkpoint` has run"
            )
            self.stdout.write(f"audit chain intact: {verdict.count} entries")
            return
        self.stdout.write(
            f"audit chain intact: {verdict.count} entries; newest checkpoint seq "
            f"{verdict.newest.seq} at {verdict.newest.body()['at']} "
            f"({verdict.checkpoints} checkpoints)"
        )
