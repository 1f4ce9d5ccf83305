"""`manage.py verify_audit`: recompute the audit hash chain; exit 1 if it is broken."""

from django.core.management.base import BaseCommand, CommandError

from leaseboard.core.services.audit import audit_verify


class Command(BaseCommand):
    help = "Verify the append-only audit log's hash chain."

    def handle(self, *args, **options):
        count, problems = audit_verify()
        for line in problems:
            self.stderr.write(line)
        if problems:
            raise CommandError(f"audit chain broken: {len(problems)} problem(s) in {count} entries")
        self.stdout.write(f"audit chain intact: {count} entries")
