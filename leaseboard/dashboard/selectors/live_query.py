"""The live page's queries: the leases its filters select (the search read once as ids
when the matches are few), the parts whose union is its list (live leases narrowed by
certainty, or those that ended), the section of leases that ended a moment ago, the
bounded total, and its rows read through a prepared statement on PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import BigIntegerField, F, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from leaseboard.core.lookups import AnyOf
from leaseboard.core.models import Lease, WorkItem
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.core.sql import POSTGRESQL, prepared_cursor
from leaseboard.dashboard.selectors.counters import COUNTER_CAP, HOUR_MS
from leaseboard.dashboard.selectors.live_filters import LiveFilters
from leaseboard.dashboard.selectors.rows import ROW_FIELDS, LiveLease

ENDED_STATES = ("expired", "released", "revoked")
ENDED_SHOWN = 20  # rows of the "ended a moment ago" section (the "ended" filter pages all)


def filtered(filters: LiveFilters) -> tuple[QuerySet[Lease], bool]:
    """The leases the filters select, and whether their statements may be prepared: not
    when a broad search matches keys in a subquery, whose generic plan PostgreSQL would
    cost for an unknown pattern (a search for "42" took twice as long prepared)."""
    qs = Lease.objects.all()
    if filters.queue:
        qs = qs.filter(work_item__queue__name=filters.queue)
    if filters.queues is not None:
        qs = qs.filter(work_item__queue__name__in=sorted(filters.queues))
    if filters.holder:
        qs = qs.filter(holder__name=filters.holder)
    if filters.q:
        items = _matching_items(filters.q)
        if not isinstance(items, list):
            return qs.filter(work_item_id__in=items), False
        qs = qs.filter(AnyOf(F("work_item_id"), items))
    return qs, True


def leases_filtered(filters: LiveFilters) -> QuerySet[Lease]:
    """Every lease (live or not) the page's queue, holder and search filters select: what
    a bulk act "on all matching this filter" starts from (selectors/revocations.py)."""
    return filtered(filters)[0]


SEARCH_IDS_CAP = 2000  # matching work items read once, as ids, up to this many


def _matching_items(q: str) -> list[int] | QuerySet[WorkItem, int]:
    """The work items whose key contains `q` (any case). Read once, as ids, when they are
    few: every part of the list and its bounded total then filter on those ids instead of
    each matching the keys again (over the pg_trgm index, core migration 0009). A broad
    search stays a subquery."""
    matching = WorkItem.objects.filter(key__icontains=q).values_list("id", flat=True)
    ids = list(matching[: SEARCH_IDS_CAP + 1])
    return ids if len(ids) <= SEARCH_IDS_CAP else matching


def listed_parts(filters: LiveFilters, now_ms: int) -> tuple[list[QuerySet[Lease]], bool]:
    """The querysets whose union is the page's list: live leases (narrowed by certainty),
    or the leases that ended; and whether their statements may be prepared (filtered)."""
    qs, prepare = filtered(filters)
    if filters.certainty == "expired":
        return [qs.filter(state=Lease.State.EXPIRED, ended_at_ms__gte=now_ms - HOUR_MS)], prepare
    if filters.certainty == "ended":
        return [qs.filter(state__in=ENDED_STATES, ended_at_ms__gte=now_ms - HOUR_MS)], prepare
    live = qs.filter(state__in=LIVE_STATES)
    # due_at_ms is jeopardy_at_ms while active, expires_at_ms in jeopardy (indexed).
    if filters.certainty == "active":
        return [live.filter(state=Lease.State.ACTIVE, due_at_ms__gt=now_ms)], prepare
    if filters.certainty == "jeopardy":
        jeopardy = Q(state=Lease.State.JEOPARDY, due_at_ms__gt=now_ms) | Q(
            state=Lease.State.ACTIVE, due_at_ms__lte=now_ms, expires_at_ms__gt=now_ms
        )
        return [live.filter(jeopardy)], prepare
    return [live], prepare


def recently_ended(filters: LiveFilters, now_ms: int) -> list[LiveLease]:
    """The default view's section below the live leases: the last few moments' endings
    (over lease_ended_idx), newest first; on the first page only."""
    window = settings.LEASEBOARD_DASHBOARD_ENDED_VISIBLE_MS
    if filters.certainty or filters.cursor or not window:
        return []
    qs, _ = filtered(filters)
    since = now_ms - window
    ended = qs.filter(state__in=ENDED_STATES, ended_at_ms__gte=since)
    # Cut at the section's last end time first (ties included), read from the index in
    # end order: in an expiry storm 50,000 leases end within the window, and ordering
    # them by (end, work key) joined every one to its work item, holder and queue before
    # the sort kept 20 (160-980 ms a statement in `make storm`, growing with the storm).
    edge = ended.order_by("-ended_at_ms").values("ended_at_ms")[ENDED_SHOWN - 1 : ENDED_SHOWN]
    bound = Coalesce(Subquery(edge), Value(since, output_field=BigIntegerField()))
    ended = ended.filter(ended_at_ms__gte=bound)
    rows = ended.order_by("-ended_at_ms", "work_item__key").values_list(*ROW_FIELDS)
    return [LiveLease.from_values(row) for row in rows[:ENDED_SHOWN]]


def bounded_total(parts: list[QuerySet[Lease]], prepare: bool) -> int:
    """How many leases the list has, counted up to COUNTER_CAP+1 (one query)."""
    capped = [p.order_by().values("id")[: COUNTER_CAP + 1] for p in parts]
    if not connection.features.supports_slicing_ordering_in_compound:
        return min(sum(c.count() for c in capped), COUNTER_CAP + 1)
    ids = capped[0] if len(capped) == 1 else capped[0].union(*capped[1:], all=True)
    if not prepare:
        return min(ids.count(), COUNTER_CAP + 1)
    try:
        sql, params = ids.query.get_compiler(connection=connection).as_sql()
    except EmptyResultSet:
        return 0
    with prepared_cursor(connection) as cursor:
        cursor.execute(f"SELECT count(*) FROM ({sql}) AS listed", params)
        return min(int(cursor.fetchone()[0]), COUNTER_CAP + 1)


def prepared_rows(values: QuerySet[Lease, tuple[Any, ...]], prepare: bool) -> list[tuple[Any, ...]]:
    """The rows of a values_list queryset. On PostgreSQL its statement is prepared once it
    has run a few times on the connection (core.sql.prepared_cursor): the same text every
    poll of the same filters (the searched ids are one array parameter, core.lookups.AnyOf),
    and planning the page's join of four tables over a UNION took 1.9 ms of its 4.8."""
    if not prepare or connection.vendor != POSTGRESQL:
        return list(values)
    compiler = values.query.get_compiler(connection=connection)
    try:
        sql, params = compiler.as_sql()
    except EmptyResultSet:
        return []
    with prepared_cursor(connection) as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    converters = compiler.get_converters([col for col, _, _ in compiler.select])
    if converters:
        rows = [tuple(r) for r in compiler.apply_converters(rows, converters)]
    return rows
