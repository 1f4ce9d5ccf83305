"""The database has every index and constraint the models declare.

A migration can drop more than it says: altering a foreign key to `db_index=False` makes
Django drop every index on that one column, a declared partial unique index included
(which is how "one live lease per work item" was nearly lost). This reads the migrated
test database back and compares it with every model's Meta."""

from __future__ import annotations

import uuid

import pytest
from django.apps import apps
from django.db import IntegrityError, connection, transaction

from leaseboard.core.models import Lease
from tests.builders import leased_item

pytestmark = [pytest.mark.django_db]

APPS = ("core", "sweeps", "takeovers", "policy", "sandbox", "dashboard")


def _declared() -> list[tuple[str, str]]:
    out = []
    for model in apps.get_models():
        if model._meta.app_label not in APPS or not model._meta.managed:
            continue
        for item in (*model._meta.indexes, *model._meta.constraints):
            out.append((model._meta.db_table, item.name))
    return out


def test_the_models_declare_indexes_and_constraints_to_check():
    assert ("core_lease", "lease_one_live_per_work_item") in _declared()


@pytest.mark.parametrize(("table", "name"), _declared())
def test_every_declared_index_and_constraint_exists_in_the_database(table, name):
    with connection.cursor() as cursor:
        present = connection.introspection.get_constraints(cursor, table)
    assert name in present, f"{table}: {name} is declared but not in the database"


def test_a_second_live_lease_on_one_work_item_is_refused_by_the_database(agent):
    executor, _ = agent()
    lease = leased_item(executor, "schema-one-live")
    twin = Lease.objects.get(id=lease.id)
    twin.id = uuid.uuid4()
    twin.epoch = lease.epoch + 1
    with pytest.raises(IntegrityError), transaction.atomic():
        twin.save(force_insert=True)


def test_the_key_search_index_takes_new_keys_at_once_and_ended_leases_carry_their_state():
    """core 0017: a search never reads a pending list of keys waiting for a vacuum;
    core 0016: the "expired in the last hour" counter reads state from lease_ended_idx."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL storage parameters and INCLUDE columns")
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'workitem_key_upper_trgm'")
        assert cursor.fetchone()[0] == ["fastupdate=off"]
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'lease_ended_idx'")
        assert "INCLUDE (state)" in cursor.fetchone()[0]
