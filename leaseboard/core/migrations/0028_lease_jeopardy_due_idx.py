# lease_jeopardy_due_idx: the leases a sweep marked in jeopardy, by due time, for the live
# page's two jeopardy counters. In an expiry storm (50,000 of 100,000 leases due) each of
# those counts walked every due entry of lease_due_idx to find the few in jeopardy state:
# 16 ms and 3 ms of the counters' statement, 0.01 ms each with this index. Partial: an
# active lease never enters it, so a renew writes nothing more.
#
# Built CONCURRENTLY on PostgreSQL: core_lease keeps every ended lease, and a plain CREATE
# INDEX would block every renew and grant while it reads the table (leases would expire
# during an upgrade). SQLite builds it as usual.

from django.conf import settings
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class AddIndexConcurrentlyOnPostgres(AddIndexConcurrently):
    def database_forwards(self, *args):  # type: ignore[no-untyped-def]
        self._on_vendor("database_forwards", *args)

    def database_backwards(self, *args):  # type: ignore[no-untyped-def]
        self._on_vendor("database_backwards", *args)

    def _on_vendor(self, step, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        concurrently = schema_editor.connection.vendor == "postgresql"
        base = AddIndexConcurrently if concurrently else migrations.AddIndex
        getattr(base, step)(self, app_label, schema_editor, from_state, to_state)


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY runs outside a transaction

    dependencies = [
        ("core", "0027_effect_kind_display"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        AddIndexConcurrentlyOnPostgres(
            model_name="lease",
            index=models.Index(
                condition=models.Q(("state", "jeopardy")),
                fields=["due_at_ms"],
                name="lease_jeopardy_due_idx",
            ),
        ),
    ]
