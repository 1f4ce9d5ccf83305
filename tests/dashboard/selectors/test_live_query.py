"""The live page's queries (leaseboard/dashboard/selectors/live_query.py): what its filters
select, the parts whose union is its list, the section of leases that just ended and the
bounded total, on real PostgreSQL."""

from __future__ import annotations

import pytest

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Lease, Queue
from leaseboard.core.services.leases import lease_release
from leaseboard.dashboard.selectors import live_query
from leaseboard.dashboard.selectors.counters import COUNTER_CAP
from leaseboard.dashboard.selectors.live_filters import LiveFilters
from leaseboard.dashboard.selectors.live_query import (
    bounded_total,
    leases_filtered,
    listed_parts,
    prepared_rows,
    recently_ended,
)
from leaseboard.dashboard.selectors.rows import ROW_FIELDS
from tests.builders import age_lease, leased_item

pytestmark = pytest.mark.django_db


def _keys(qs) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(qs.values_list("work_item__key", flat=True))


def test_the_filters_select_by_queue_holder_and_key(agent, monkeypatch):
    Queue.objects.get_or_create(name="ops")
    ann, _ = agent("ann")
    bob, _ = agent("bob")
    leased_item(ann, key="refund-1")
    leased_item(ann, key="deploy-1", queue="ops")
    leased_item(bob, key="refund-2", queue="ops")
    assert _keys(leases_filtered(LiveFilters(queue="ops"))) == ["deploy-1", "refund-2"]
    assert _keys(leases_filtered(LiveFilters(holder="bob"))) == ["refund-2"]
    assert _keys(leases_filtered(LiveFilters(q="REFUND"))) == ["refund-1", "refund-2"]
    assert _keys(leases_filtered(LiveFilters(queues=frozenset({"default"})))) == ["refund-1"]
    # A broad search stays a subquery, not prepared; the same rows.
    assert live_query.filtered(LiveFilters(q="refund"))[1] is True
    monkeypatch.setattr(live_query, "SEARCH_IDS_CAP", 1)
    qs, prepare = live_query.filtered(LiveFilters(q="refund"))
    assert prepare is False and _keys(qs) == ["refund-1", "refund-2"]


def test_the_parts_narrow_by_certainty_and_the_total_counts_them(agent):
    executor, _ = agent()
    healthy, late, gone = (leased_item(executor, key=k) for k in ("h-1", "j-1", "r-1"))
    age_lease(late.id, late.jeopardy_after_ms + 100)
    lease_release(lease_id=gone.id, executor=executor, epoch=gone.epoch)
    now = db_now_ms()

    def listed(certainty: str) -> list[str]:
        parts, _ = listed_parts(LiveFilters(certainty=certainty), now)
        return sorted(k for p in parts for k in p.values_list("work_item__key", flat=True))

    assert listed("") == ["h-1", "j-1"]
    assert listed("active") == ["h-1"] and listed("jeopardy") == ["j-1"]
    assert listed("ended") == ["r-1"] and listed("expired") == []
    parts, prepare = listed_parts(LiveFilters(), now)
    assert bounded_total(parts, prepare) == 2 and bounded_total(parts, False) == 2
    assert COUNTER_CAP >= 2
    rows = prepared_rows(parts[0].order_by("work_item__key").values_list(*ROW_FIELDS), True)
    assert [r[ROW_FIELDS.index("work_item__key")] for r in rows] == ["h-1", "j-1"]


def test_the_ended_section_is_the_default_first_pages_only(agent, settings):
    settings.LEASEBOARD_DASHBOARD_ENDED_VISIBLE_MS = 60_000
    executor, _ = agent()
    gone = leased_item(executor, key="r-1")
    lease_release(lease_id=gone.id, executor=executor, epoch=gone.epoch)
    now = db_now_ms()
    assert [x.work_item.key for x in recently_ended(LiveFilters(), now)] == ["r-1"]
    assert recently_ended(LiveFilters(cursor="x"), now) == []
    assert recently_ended(LiveFilters(certainty="active"), now) == []


def test_the_ended_section_is_the_newest_endings_cut_at_its_last_with_ties_by_key(
    agent, settings, monkeypatch
):
    """The section is cut at its last end time before the join and the sort (an expiry
    storm ends 50,000 leases within the window): the same rows as ordering every ending
    by (end, work key), ties at the edge included before the cut to the section's size."""
    settings.LEASEBOARD_DASHBOARD_ENDED_VISIBLE_MS = 60_000
    monkeypatch.setattr(live_query, "ENDED_SHOWN", 3)
    executor, _ = agent()
    now = db_now_ms()
    ended_ago = {"e-1": 100, "e-5": 200, "e-3": 300, "e-2": 300, "e-4": 300, "e-6": 400}
    for key, ago in ended_ago.items():
        gone = leased_item(executor, key=key)
        lease_release(lease_id=gone.id, executor=executor, epoch=gone.epoch)
        Lease.objects.filter(id=gone.id).update(ended_at_ms=now - ago)
    # Newest first; the third place is a tie of three at 300 ms, taken in key order.
    assert [x.work_item.key for x in recently_ended(LiveFilters(), now)] == ["e-1", "e-5", "e-2"]
    # Fewer endings than the section holds: no cut, all of them.
    monkeypatch.setattr(live_query, "ENDED_SHOWN", 10)
    assert len(recently_ended(LiveFilters(), now)) == 6
