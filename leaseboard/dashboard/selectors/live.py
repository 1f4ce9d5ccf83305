"""The live leases page: the counters (selectors/counters.py), a keyset page of live leases,
most urgent first by default (in jeopardy, on hold, waiting for an approver, then the
healthy rest by work key; or by work key, holder or time left on request), the leases that
ended in the last LEASEBOARD_DASHBOARD_ENDED_VISIBLE_MS in a section of their own below
(greyed, with their end reason), and the version that lets the polled fragment answer 304.
The rows are read as values (rows.LiveLease).

Here the page is put together; its parts live by subject beside it: live_filters (the
query string's filters and sorts), live_query (the statements: filtering, the list's
parts, the bounded total, prepared rows), live_urgency (the default sort's ranks) and
live_paging (the keyset cursor).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from django.apps import apps
from django.db import connection
from django.db.models import F, QuerySet

from leaseboard.core.models import Lease
from leaseboard.core.paging import page_version
from leaseboard.dashboard.selectors.counters import COUNTER_CAP, Counters, live_counters
from leaseboard.dashboard.selectors.live_filters import (
    CERTAINTY_FILTERS,
    PAGE_SIZES,
    SORT_CHOICES,
    SORTS,
    LiveFilters,
)
from leaseboard.dashboard.selectors.live_paging import (
    decode_cursor,
    encode_cursor,
    keyset_after,
    sort_values,
)
from leaseboard.dashboard.selectors.live_query import (
    bounded_total,
    leases_filtered,
    listed_parts,
    prepared_rows,
    recently_ended,
)
from leaseboard.dashboard.selectors.live_urgency import (
    jeopardy_fills_page,
    urgency_ranked,
    urgent,
)
from leaseboard.dashboard.selectors.rows import (
    ROW_FIELDS,
    LeaseRow,
    LiveLease,
    PendingTakeover,
    lease_row,
)

# What the view and the bulk acts read from here (the page's vocabulary and its filter).
__all__ = [
    "CERTAINTY_FILTERS",
    "PAGE_SIZES",
    "SORT_CHOICES",
    "LiveFilters",
    "LivePage",
    "leases_filtered",
    "live_counters",
    "live_leases",
    "live_version",
]


@dataclass
class LivePage:
    filters: LiveFilters
    rows: list[LeaseRow[LiveLease]]
    next_cursor: str
    now_ms: int
    counters: Counters
    total: int  # leases matching the filters, up to the cap
    # The first page of the default view: leases that ended a moment ago, newest first.
    ended: list[LeaseRow[LiveLease]] = field(default_factory=list)
    version: str = field(default="")

    @property
    def last_row(self) -> int:
        return self.filters.first_row + len(self.rows) - 1

    @property
    def total_cap(self) -> int:
        return COUNTER_CAP


def live_leases(filters: LiveFilters) -> LivePage:
    """The live leases page: 4 queries (clock + counters, the page's rows, the bounded
    total, the leases that ended a moment ago), whatever the page size or the number of
    leases, and a fifth while some takeover request waits (the rows' pending requests).

    Each part of the list is read in the chosen order from its keyset cursor with LIMIT
    size+1 (several parts in one UNION ALL, merged here and cut to the page). Keyset
    cursor: the last row's sort values, encoded.
    """
    now_ms, counters = live_counters()
    fields = SORTS[filters.sort_name]
    order = [F(f).desc() if filters.descending else F(f).asc() for f in fields]
    cursor = decode_cursor(filters.cursor, len(fields))
    parts, prepare = listed_parts(filters, now_ms)
    urgency = filters.sort_name == "urgency"
    if urgency:
        ranked = urgency_ranked(parts, filters, now_ms, cursor, counters)
        # Not prepared: a generic plan, blind to the clock parameter, reads the jeopardy
        # rank's `due_at_ms <= now` as a large range (600 ms a page at 100k leases against
        # 30 ms planned for the value).
        prepare = False
        leases = _read_ranked(ranked, filters, now_ms, counters)
    else:
        limited = []
        for part in parts:
            if cursor:
                part = part.filter(keyset_after(fields, cursor, filters.descending))
            limited.append(part.order_by(*order)[: filters.size + 1])
        leases = _read(limited, now_ms, urgency=urgency, prepare=prepare)
    leases.sort(key=lambda x: sort_values(x, fields), reverse=filters.descending)
    page_rows = leases[: filters.size]
    next_cursor = (
        encode_cursor(sort_values(page_rows[-1], fields)) if len(leases) > filters.size else ""
    )
    total = bounded_total(parts, prepare)
    rows = _with_pending([lease_row(lease, now_ms) for lease in page_rows], counters)
    ended = [lease_row(lease, now_ms) for lease in recently_ended(filters, now_ms)]
    page = LivePage(filters, rows, next_cursor, now_ms, counters, total, ended)
    page.version = live_version(page)
    return page


def _read_ranked(
    ranked: list[tuple[int, QuerySet[Any]]], filters: LiveFilters, now_ms: int, counters: Counters
) -> list[LiveLease]:
    """The urgency sort's parts. When more leases may be in jeopardy than a page shows
    (an expiry storm), most urgent first: the jeopardy rank alone, and the other ranks only
    if it falls short of a page. In a storm half the fleet is in jeopardy and the healthy
    rank, in work key order, walks every work item whose lease is not healthy before its
    first row (63 of the page's 79 ms at 50,000 in jeopardy of 100,000, docs/benchmarks.md)."""
    first = [qs for r, qs in ranked if r == 0]
    if not first or filters.descending or not jeopardy_fills_page(filters, counters):
        return _read([qs for _, qs in ranked], now_ms, urgency=True, prepare=False)
    leases = _read(first, now_ms, urgency=True, prepare=False)
    rest = [qs for r, qs in ranked if r != 0]
    if len(leases) > filters.size or not rest:
        return leases  # a page and the next one's first row: the later ranks come after
    return leases + _read(rest, now_ms, urgency=True, prepare=False)


def _read(
    limited: list[QuerySet[Any]], now_ms: int, *, urgency: bool, prepare: bool
) -> list[LiveLease]:
    """The rows of the list's parts, each read with its LIMIT: one statement (the parts'
    ids in one UNION ALL, then their rows), or one a part on SQLite."""
    columns = (*ROW_FIELDS, "urgency", "urgent_due") if urgency else ROW_FIELDS
    if not limited:
        values = []
    elif len(limited) == 1:
        values = prepared_rows(limited[0].values_list(*columns), prepare)
    elif not connection.features.supports_slicing_ordering_in_compound:
        # SQLite (the embedded default) allows no LIMIT inside a UNION: one query a part.
        values = [row for part in limited for row in part.values_list(*columns)]
    else:
        ids = limited[0].values("id").union(*[p.values("id") for p in limited[1:]], all=True)
        listed = Lease.objects.filter(id__in=ids)
        listed = urgent(listed, now_ms) if urgency else listed
        values = prepared_rows(listed.values_list(*columns), prepare)
    return [LiveLease.from_values(row) for row in values]


def _with_pending(rows: list[LeaseRow[LiveLease]], counters: Counters) -> list[LeaseRow[LiveLease]]:
    """The live rows whose work item has a takeover request waiting, with it (one query,
    none when the counters say no request waits). Read through the app registry, as the
    blocked page does: the takeover workflow's pages import the dashboard, not back."""
    keys = [r.lease.work_item.key for r in rows if r.live]
    if not keys or counters.pending_takeovers == 0:
        return rows
    if not apps.is_installed("leaseboard.takeovers"):
        return rows
    requests = apps.get_model("takeovers", "TakeoverRequest")
    found = {
        key: PendingTakeover(rid, username, user_id, grantee, grantee_user == user_id)
        for key, rid, username, user_id, grantee, grantee_user in requests.objects.filter(
            status="pending", work_item__key__in=keys
        ).values_list(
            "work_item__key",
            "id",
            "requested_by__username",
            "requested_by_id",
            "grantee__name",
            "grantee__user_id",
        )
    }
    if not found:
        return rows
    return [
        replace(r, pending=found[r.lease.work_item.key])
        if r.live and r.lease.work_item.key in found
        else r
        for r in rows
    ]


def live_version(page: LivePage) -> str:
    """What the fragment shows, minus the passing of time the browser counts down itself.
    Equal versions mean an identical fragment, so the poll can answer 304."""
    body = {
        "f": page.filters.query(),
        "c": [
            page.counters.active,
            page.counters.jeopardy,
            page.counters.expired_last_hour,
            page.counters.split_exact,
        ],
        "t": page.counters.pending_takeovers,
        "b": page.counters.needs_reconciliation,
        "n": page.next_cursor,
        "total": page.total,
        "r": [
            [
                str(r.lease.id),
                r.lease.epoch,
                r.certainty,
                r.lease.renewed_at_ms,
                r.lease.expires_at_ms,
                r.lease.renew_count,
                r.lease.max_gap_ms,
                r.lease.holder_id,
                r.lease.end_reason,
                r.lease.hold_reason,
                r.pending.id if r.pending else None,
            ]
            for r in page.rows
        ],
        "e": [[str(r.lease.id), r.lease.state, r.lease.end_reason] for r in page.ended],
    }
    return page_version(body)
