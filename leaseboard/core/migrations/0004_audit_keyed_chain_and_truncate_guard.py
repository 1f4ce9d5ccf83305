"""The audit log becomes a keyed chain (HMAC with a key outside the database), and
PostgreSQL refuses TRUNCATE on it.

Entries written before this migration were chained with plain SHA-256, which anyone who
can write the table can recompute. They are kept as they are (the log is append-only) and
anchored: if any exist, this migration appends one keyed `audit.anchor` entry whose
prev_hash is their last hash and whose MAC covers it, so rewriting them breaks the anchor.
From the anchor on, `verify_audit` refuses any unkeyed entry (docs/audit.md).

On SQLite, adding the column rebuilds the table, which drops its triggers: they are put
back here.
"""

from django.conf import settings
from django.db import migrations, models

from leaseboard.core.clock import now_ms_sql
from leaseboard.core.models.audit import audit_key_id, entry_mac


def anchor_unkeyed_entries(apps, schema_editor):
    AuditEntry = apps.get_model("core", "AuditEntry")
    AuditHead = apps.get_model("core", "AuditHead")
    last = AuditEntry.objects.order_by("-seq").first()
    if last is None:
        return
    key = settings.LEASEBOARD_AUDIT_KEY
    head = AuditHead.objects.filter(id=1).first()
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"SELECT {now_ms_sql(schema_editor.connection.vendor)}")
        now_ms = int(cursor.fetchone()[0])
    # The v1 entry body, frozen here as AuditEntry.body() wrote it when this migration landed.
    body = {
        "seq": last.seq + 1,
        "at_ms": now_ms,
        "actor_user": None,
        "actor_name": "migration",
        "actor_role": "system",
        "action": "audit.anchor",
        "object_type": "audit",
        "object_id": "chain",
        "work_item": None,
        "reason": "the audit chain is keyed from here on",
        "before": {},
        "after": {
            "unkeyed_entries": AuditEntry.objects.count(),
            "unkeyed_head": last.hash,
            "head_row": {"seq": head.seq, "last_hash": head.last_hash} if head else None,
        },
        "request_id": "",
        "prev_hash": last.hash,
        "key_id": audit_key_id(key),
    }
    fields = {k: v for k, v in body.items() if k not in {"actor_user", "work_item"}}
    entry = AuditEntry.objects.create(**fields, hash=entry_mac(key, body))
    AuditHead.objects.update_or_create(id=1, defaults={"seq": entry.seq, "last_hash": entry.hash})


TRUNCATE_GUARD_SQL = """
CREATE OR REPLACE FUNCTION core_audit_no_truncate() RETURNS trigger AS $$
BEGIN
    -- Django's test flush sets this on its own connections (settings.py, TESTING only).
    IF current_setting('leaseboard.audit_truncate', true) = 'allow' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'the audit log is append-only: TRUNCATE refused';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER core_auditentry_no_truncate
    BEFORE TRUNCATE ON core_auditentry
    FOR EACH STATEMENT EXECUTE FUNCTION core_audit_no_truncate();
"""
TRUNCATE_UNGUARD_SQL = """
DROP TRIGGER IF EXISTS core_auditentry_no_truncate ON core_auditentry;
DROP FUNCTION IF EXISTS core_audit_no_truncate();
"""
SQLITE_GUARDS = [
    "CREATE TRIGGER IF NOT EXISTS core_auditentry_no_update BEFORE UPDATE ON core_auditentry "
    "BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;",
    "CREATE TRIGGER IF NOT EXISTS core_auditentry_no_delete BEFORE DELETE ON core_auditentry "
    "BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;",
]


def add_guards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(TRUNCATE_GUARD_SQL)
    else:
        for sql in SQLITE_GUARDS:
            schema_editor.execute(sql)


def remove_guards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(TRUNCATE_UNGUARD_SQL)


class Migration(migrations.Migration):
    dependencies = [("core", "0003_remove_workitem_lock_delay_until")]

    operations = [
        migrations.AddField(
            model_name="auditentry",
            name="key_id",
            field=models.CharField(blank=True, default="", max_length=16),
        ),
        migrations.RunPython(add_guards, remove_guards),
        migrations.RunPython(anchor_unkeyed_entries, migrations.RunPython.noop),
    ]
