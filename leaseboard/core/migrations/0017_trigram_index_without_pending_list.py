"""The work-key trigram index (0012) takes each new key at once (`fastupdate = off`)
instead of queueing it in GIN's pending list until a vacuum: every search reads the whole
pending list, up to `gin_pending_list_limit` (4 MB), and at 100,000 keys with 10,000 of
them pending a search read 362 pending pages and took 10–15 ms; with the list empty, 3.5–5
ms. An admission pays for it: ~0.13 ms more per new key (2,000 single-row inserts of
36-trigram keys: 49 ms -> 310 ms). PostgreSQL's documentation advises the same where
consistent response time matters more than insert speed. Existing pending entries are
merged now. PostgreSQL only."""

from django.db import migrations

INDEX = "workitem_key_upper_trgm"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"ALTER INDEX IF EXISTS {INDEX} SET (fastupdate = off)")
    schema_editor.execute(
        f"SELECT gin_clean_pending_list('{INDEX}'::regclass) "
        f"WHERE to_regclass('{INDEX}') IS NOT NULL"
    )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"ALTER INDEX IF EXISTS {INDEX} RESET (fastupdate)")


class Migration(migrations.Migration):
    dependencies = [("core", "0016_ended_index_state")]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
