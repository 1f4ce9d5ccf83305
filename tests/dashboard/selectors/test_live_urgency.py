"""The urgency sort (leaseboard/dashboard/selectors/live_urgency.py): each live lease in
one rank (in jeopardy by time first, then healthy), each rank read as its own indexed part,
and a cursor's rank skipping the parts behind it."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Lease
from leaseboard.dashboard.selectors.counters import live_counters
from leaseboard.dashboard.selectors.live import live_leases
from leaseboard.dashboard.selectors.live_filters import LiveFilters
from leaseboard.dashboard.selectors.live_urgency import HEALTHY, urgency_ranked, urgent
from tests.builders import age_lease, leased_item

pytestmark = pytest.mark.django_db


def urgency_limited(*args):  # type: ignore[no-untyped-def]
    """The parts of urgency_ranked, without their ranks."""
    return [qs for _, qs in urgency_ranked(*args)]


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
    assert counters.jeopardy == 0 and counters.unswept == 0 and counters.urgent == 0
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
    # The cut: the third due time (a page + 1), read first, as the bound.
    third = sorted(Lease.objects.values_list("due_at_ms", flat=True), reverse=sort[0] == "-")[2]
    assert f"{'>=' if sort[0] == '-' else '<='} {third})" in str(jeopardy.query)
    assert list(jeopardy.values_list("work_item__key", flat=True)) == first


def _page_keys(filters: LiveFilters) -> tuple[list[str], str, list[str]]:
    """The page's work keys, its next cursor and the statements that read leases."""
    with CaptureQueriesContext(connection) as queries:
        page = live_leases(filters)
    reads = [q["sql"] for q in queries.captured_queries if 'FROM "core_lease"' in q["sql"]]
    return [r.lease.work_item.key for r in page.rows], page.next_cursor, reads


def test_when_jeopardy_fills_the_page_the_other_ranks_are_not_read(agent):
    """An expiry storm: more leases in jeopardy than a page shows. The page is the
    jeopardy rank alone, in due order, and paging on reaches the healthy rest; the healthy
    rank (a walk in work key order past every lease in jeopardy) is read only then."""
    executor, _ = agent()
    for key in ("h-1", "h-2"):
        leased_item(executor, key=key)
    for n, key in enumerate(("j-c", "j-a", "j-b")):
        late = leased_item(executor, key=key)
        age_lease(late.id, late.jeopardy_after_ms + 1000 - n * 100)  # j-c most overdue
    keys, cursor, reads = _page_keys(LiveFilters(size=2))
    assert keys == ["j-c", "j-a"] and cursor
    # The jeopardy rank alone: no part of the later ranks (on hold the first of them).
    assert reads and not any('"held_at_ms" IS NOT NULL' in sql for sql in reads)
    keys, cursor, reads = _page_keys(LiveFilters(size=2, cursor=cursor))
    assert keys == ["j-b", "h-1"] and cursor  # the rank's last row, then the healthy rest
    keys, cursor, _ = _page_keys(LiveFilters(size=2, cursor=cursor))
    assert keys == ["h-2"] and not cursor


def test_when_jeopardy_falls_short_of_a_page_the_other_ranks_follow_it(agent):
    executor, _ = agent()
    for key in ("h-1", "h-2"):
        leased_item(executor, key=key)
    for key in ("j-a", "j-b", "j-c"):
        late = leased_item(executor, key=key)
        age_lease(late.id, late.jeopardy_after_ms + 1000)
    # The counters count 3 in jeopardy (a page of 2 and one more), but the page filters
    # by holder to one lease in jeopardy: the jeopardy rank is read, falls short, and the
    # healthy rank fills the rest of the page.
    other, _ = agent()
    late = leased_item(other, key="j-o")
    age_lease(late.id, late.jeopardy_after_ms + 2000)
    leased_item(other, key="h-o")
    keys, cursor, _ = _page_keys(LiveFilters(size=2, holder=other.name))
    assert keys == ["j-o", "h-o"] and not cursor
