"""Work-key search on the live page (`?q=`, a case-insensitive substring: Django's
`icontains`, which PostgreSQL runs as `UPPER(key::text) LIKE UPPER('%…%')`) through a
pg_trgm GIN index on that very expression, so a search at 100,000 leases reads the
matching keys instead of every key. PostgreSQL only: on SQLite (the embedded mode) this
migration does nothing. pg_trgm is a trusted extension (PostgreSQL 13+): the database's
owner may create it."""

from django.db import migrations

INDEX = "workitem_key_upper_trgm"


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    schema_editor.execute(
        f"CREATE INDEX IF NOT EXISTS {INDEX} ON core_workitem "
        "USING gin (UPPER(key::text) gin_trgm_ops)"
    )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [("core", "0011_operator_hold_on_lease")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
