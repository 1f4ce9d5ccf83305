"""AnyOf: the rows whose column is one of the values, in one array parameter on PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from leaseboard.core.lookups import AnyOf
from leaseboard.core.models import Lease, WorkItem
from tests.builders import leased_item

pytestmark = pytest.mark.django_db


def test_any_of_selects_what_an_in_list_selects_in_one_parameter(agent):
    executor, _ = agent()
    leases = [leased_item(executor, f"any-of-{i}") for i in range(6)]
    wanted = [lease.work_item_id for lease in leases[1:4]] + [10**12]  # and one unknown id
    with CaptureQueriesContext(connection) as ctx:
        got = set(
            Lease.objects.filter(AnyOf(F("work_item_id"), wanted)).values_list("id", flat=True)
        )
    assert (
        got
        == set(Lease.objects.filter(work_item_id__in=wanted).values_list("id", flat=True))
        == {lease.id for lease in leases[1:4]}
    )
    if connection.vendor == "postgresql":
        assert "= ANY(" in ctx.captured_queries[0]["sql"]


def test_any_of_nothing_matches_nothing_and_composes_with_other_filters(agent):
    executor, _ = agent()
    lease = leased_item(executor, "any-of-alone")
    assert not Lease.objects.filter(AnyOf(F("work_item_id"), [])).exists()
    assert list(
        WorkItem.objects.filter(
            AnyOf(F("id"), [lease.work_item_id]), key="any-of-alone"
        ).values_list("key", flat=True)
    ) == ["any-of-alone"]
    assert not WorkItem.objects.filter(AnyOf(F("id"), [lease.work_item_id]), key="other").exists()
