"""The `default` queue (no capacity limit) and, on PostgreSQL, a trigger that makes the
audit log append-only for every client, not only for the ORM."""

from django.db import migrations


def create_default_queue(apps, schema_editor):
    Queue = apps.get_model("core", "Queue")
    Queue.objects.get_or_create(name="default", defaults={"capacity": None})
    AuditHead = apps.get_model("core", "AuditHead")
    AuditHead.objects.get_or_create(id=1)


GUARD_SQL = """
CREATE OR REPLACE FUNCTION core_audit_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER core_auditentry_append_only
    BEFORE UPDATE OR DELETE ON core_auditentry
    FOR EACH ROW EXECUTE FUNCTION core_audit_append_only();
"""
UNGUARD_SQL = """
DROP TRIGGER IF EXISTS core_auditentry_append_only ON core_auditentry;
DROP FUNCTION IF EXISTS core_audit_append_only();
"""


def add_guard(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(GUARD_SQL)
    else:
        schema_editor.execute(
            "CREATE TRIGGER core_auditentry_no_update BEFORE UPDATE ON core_auditentry "
            "BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;"
        )
        schema_editor.execute(
            "CREATE TRIGGER core_auditentry_no_delete BEFORE DELETE ON core_auditentry "
            "BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;"
        )


def remove_guard(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(UNGUARD_SQL)
    else:
        schema_editor.execute("DROP TRIGGER IF EXISTS core_auditentry_no_update;")
        schema_editor.execute("DROP TRIGGER IF EXISTS core_auditentry_no_delete;")


class Migration(migrations.Migration):
    dependencies = [("core", "0001_initial")]

    operations = [
        migrations.RunPython(create_default_queue, migrations.RunPython.noop),
        migrations.RunPython(add_guard, remove_guard),
    ]
