"""The urgency sort (leaseboard/dashboard/selectors/live_urgency.py): each live lease in
one rank (in jeopardy by time first, then healthy), each rank read as its own indexed part,
and a cursor's rank skipping the parts behind it."""

from __future__ import annotations

import pytest

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Lease
from leaseboard.dashboard.selectors.counters import live_counters
from leaseboard.dashboard.selectors.live_filters import LiveFilters
from leaseboard.dashboard.selectors.live_urgency import HEALTHY, urgency_limited, urgent
from tests.builders import age_lease, leased_item

pytestmark = pytest.mark.django_db


def _scene(agent):  # type: ignore[no-untyped-def]
    executor, _ = agent()
    leased_item(executor, key="h-1")
    late = leased_item(executor, key="j-1")
    age_lease(late.id, late.jeopardy_after_ms + 100)
    return late


def test_each_lease_gets_its_rank_and_its_due_time(agent):
    late = _scene(agent)
    ranked = urgent(Lease.objects.select_related("work_item"), db_now_ms())
    by_key = {x.work_item.key: (x.urgency, x.urgent_due) for x in ranked}
    late.refresh_from_db()
    assert by_key == {"j-1": (0, late.due_at_ms), "h-1": (HEALTHY, 0)}


def test_each_rank_is_a_part_and_a_cursor_skips_the_ranks_behind_it(agent):
    _scene(agent)
    now, counters = live_counters()
    live = [Lease.objects.filter(state__in=["active", "jeopardy"])]
    filters = LiveFilters()
    limited = urgency_limited(live, filters, now, None, counters)
    found = [list(p.values_list("work_item__key", "urgency")) for p in limited]
    assert [row for part in found for row in part] == [("j-1", 0), ("h-1", HEALTHY)]
    behind = urgency_limited(live, filters, now, [HEALTHY, 0, "a", 1], counters)
    assert [list(p.values_list("work_item__key", flat=True)) for p in behind] == [["h-1"]]


def test_with_nothing_in_jeopardy_the_first_rank_is_not_read(agent):
    executor, _ = agent()
    leased_item(executor, key="h-1")
    now, counters = live_counters()
    assert counters.jeopardy == 0 and counters.unswept == 0
    live = [Lease.objects.filter(state__in=["active", "jeopardy"])]
    limited = urgency_limited(live, LiveFilters(), now, None, counters)
    assert len(limited) == 3  # on hold, waiting, healthy: no index walk for jeopardy


@pytest.mark.parametrize(
    ("sort", "first"), [("urgency", ["k-a", "k-b", "k-c"]), ("-urgency", ["k-e", "k-d", "k-c"])]
)
def test_the_jeopardy_rank_is_cut_at_its_page_th_due_time_with_the_same_rows(agent, sort, first):
    """due_cut: the rows no later than the page's last due time (ties included), so the
    rank's order by (due, work key, epoch) gives the same page without sorting every
    lease in jeopardy by its work key."""
    executor, _ = agent()
    now = db_now_ms()
    # Three leases share the due time at the page's edge; the page takes two of them.
    for key, ago in (("k-c", 200), ("k-a", 300), ("k-e", 100), ("k-d", 200), ("k-b", 200)):
        lease = leased_item(executor, key=key)
        Lease.objects.filter(id=lease.id).update(due_at_ms=now - ago)
    now, counters = live_counters()
    live = [Lease.objects.filter(state__in=["active", "jeopardy"])]
    filters = LiveFilters(sort=sort, size=2)
    jeopardy = urgency_limited(live, filters, now, None, counters)[0]
    assert "OFFSET 2" in str(jeopardy.query)  # the cut: the third due time, a page + 1
    assert list(jeopardy.values_list("work_item__key", flat=True)) == first
