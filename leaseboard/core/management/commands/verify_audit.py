"""`manage.py verify_audit [--without-checkpoints]`: check the keyed audit chain and the
signed checkpoints; exit 1 with one line per problem if anything is broken, including
checkpoints that were expected and are missing (the store removed, or checkpointing
stopped). `--without-checkpoints` verifies the chain alone, saying what that cannot
detect (docs/audit.md)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from leaseboard.core.services.audit import audit_checkpoint_location, audit_verify

MAX_LINES = 200


class Command(BaseCommand):
    help = (
        "Verify the audit log: every entry's MAC with the audit keys, the chain's links, "
        "and the log against the newest signed checkpoint (edits, rewrites, deleted tails "
        "and truncation all fail)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--without-checkpoints",
            action="store_true",
            help="verify the chain even though checkpoints that were expected are missing "
            "(a deleted tail or a truncation then goes undetected)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        verdict = audit_verify()
        without = options["without_checkpoints"]
        problems = verdict.problems + ([] if without else verdict.missing)
        for line in problems[:MAX_LINES]:
            self.stderr.write(line)
        if len(problems) > MAX_LINES:
            self.stderr.write(f"... and {len(problems) - MAX_LINES} more")
        if verdict.problems:
            raise CommandError(
                f"audit chain broken: {len(verdict.problems)} problem(s) in {verdict.count} entries"
            )
        if problems:
            raise CommandError(
                f"audit checkpoints missing: {len(problems)} problem(s); the chain of "
                f"{verdict.count} entries could be short of a deleted tail. Restore the store "
                "and run again, or pass --without-checkpoints to verify the chain alone"
            )
        if without and verdict.missing:
            self.stderr.write(
                "warning: verified WITHOUT the checkpoints that were expected: a deleted tail "
                "or a truncation cannot be detected now"
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
