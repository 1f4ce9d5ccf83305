"""The OpenTelemetry trace id kept with each effect and audit entry (docs/mcp.md)."""

from django.db import migrations, models

# SQLite adds a column with a default by rebuilding the table, which drops its triggers:
# put the audit log's append-only guards back, as 0004 made them.
SQLITE_GUARDS = [
    "CREATE TRIGGER IF NOT EXISTS core_auditentry_no_update BEFORE UPDATE ON core_auditentry "
    "BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;",
    "CREATE TRIGGER IF NOT EXISTS core_auditentry_no_delete BEFORE DELETE ON core_auditentry "
    "BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;",
]


def sqlite_guards(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for sql in SQLITE_GUARDS:
            schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0017_trigram_index_without_pending_list"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditentry",
            name="trace_id",
            field=models.CharField(blank=True, default="", max_length=32),
        ),
        migrations.AddField(
            model_name="effect",
            name="trace_id",
            field=models.CharField(blank=True, default="", max_length=32),
        ),
        migrations.RunPython(sqlite_guards, migrations.RunPython.noop),
    ]
