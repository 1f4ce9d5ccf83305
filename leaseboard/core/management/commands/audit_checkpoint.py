"""`manage.py audit_checkpoint`: verify what the audit log gained since the last checkpoint
and append a signed checkpoint (seq, head, count, at) to the store outside the database.
Beat runs it every LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S; exit 1 if anything is wrong."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from leaseboard.core.services.audit import audit_checkpoint, audit_checkpoint_location


class Command(BaseCommand):
    help = "Sign the audit chain's head into the checkpoint store (refuses a broken chain)."

    def handle(self, *args: Any, **options: Any) -> None:
        result = audit_checkpoint()
        for line in result.problems:
            self.stderr.write(line)
        if result.written is not None:
            cp = result.written
            self.stdout.write(
                f"checkpoint written: seq {cp.seq}, {cp.count} entries, head {cp.head[:16]}… "
                f"in {audit_checkpoint_location()}"
            )
        elif result.note:
            self.stdout.write(result.note)
        if result.problems:
            raise CommandError(f"audit checkpoint: {len(result.problems)} problem(s)")
