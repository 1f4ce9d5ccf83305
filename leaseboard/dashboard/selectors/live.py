"""The live leases page: the counters (one bounded query with the database clock) and a
keyset page of live leases, most urgent first, with the version that lets the polled
fragment answer 304.

The pending-takeovers counter reads the takeover workflow's table, found by app label in
Django's app registry (as the templates find its URLs by name), so the dashboard imports
nothing from that app; without the app the counter shows "—".
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.apps import apps
from django.db import connection
from django.db.models import Q, QuerySet

from leaseboard.core.clock import now_ms_sql
from leaseboard.core.models import Lease
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.core.paging import cut_page, pair_cursor
from leaseboard.dashboard.selectors.rows import LeaseRow, lease_row
from leaseboard.domain.text import storable_or_replaced

# Counters are exact up to this many, then shown as "1000+": each is a bounded scan.
COUNTER_CAP = 1_000
HOUR_MS = 3_600_000
PAGE_SIZES = (10, 25, 50, 100, 200)
DEFAULT_PAGE_SIZE = 50
CERTAINTY_FILTERS = ("", "active", "jeopardy", "expired")


@dataclass(frozen=True)
class LiveFilters:
    certainty: str = ""  # "" = every live lease
    queue: str = ""
    holder: str = ""
    q: str = ""  # work key search (substring)
    cursor: str = ""
    size: int = DEFAULT_PAGE_SIZE

    @classmethod
    def from_query(cls, params: Any) -> LiveFilters:
        certainty = params.get("certainty", "")
        try:
            size = int(params.get("size", DEFAULT_PAGE_SIZE))
        except (TypeError, ValueError):
            size = DEFAULT_PAGE_SIZE
        return cls(
            certainty=certainty if certainty in CERTAINTY_FILTERS else "",
            # A NUL would reach PostgreSQL as a query parameter and fail there; replaced, it
            # simply matches nothing (no stored name or key can hold one).
            queue=storable_or_replaced(params.get("queue", "").strip()[:100]),
            holder=storable_or_replaced(params.get("holder", "").strip()[:150]),
            q=storable_or_replaced(params.get("q", "").strip()[:200]),
            cursor=params.get("cursor", "").strip()[:80],
            size=min(max(size, 1), max(PAGE_SIZES)),
        )

    def query(self, **changes: Any) -> dict[str, str]:
        """Query-string parameters for these filters (with `changes`), empty ones omitted."""
        values = {
            "certainty": self.certainty,
            "queue": self.queue,
            "holder": self.holder,
            "q": self.q,
            "cursor": self.cursor,
            "size": "" if self.size == DEFAULT_PAGE_SIZE else str(self.size),
        }
        values.update({k: str(v) for k, v in changes.items()})
        return {k: v for k, v in values.items() if v}


@dataclass(frozen=True)
class Counters:
    active: int
    jeopardy: int
    expired_last_hour: int
    # None (rendered "—") when the takeover workflow is not installed.
    pending_takeovers: int | None = None
    cap: int = COUNTER_CAP


@dataclass
class LivePage:
    filters: LiveFilters
    rows: list[LeaseRow]
    next_cursor: str
    now_ms: int
    counters: Counters
    version: str = field(default="")


def _bounded(sql_from_where: str) -> str:
    return f"(SELECT count(*) FROM (SELECT 1 {sql_from_where} LIMIT {COUNTER_CAP + 1}) AS b)"


def _pending_takeovers_table() -> str | None:
    """The takeover requests' table, looked up by app label: the dashboard counts the rows
    (over their partial unique index of pending requests) without importing the app."""
    if not apps.is_installed("leaseboard.takeovers"):
        return None
    return apps.get_model("takeovers", "TakeoverRequest")._meta.db_table


def live_counters() -> tuple[int, Counters]:
    """The database clock and the page counters in one query. Each count stops at
    COUNTER_CAP+1 rows, so its cost is bounded however many leases exist."""
    t = Lease._meta.db_table
    now = now_ms_sql()
    # Every live count ranges over the partial index lease_due_idx (due_at_ms, live states):
    # due_at_ms is jeopardy_at_ms while active and expires_at_ms once in jeopardy, so each
    # condition below has an index range even when few rows match.
    live = f"FROM {t} WHERE state IN ('active', 'jeopardy')"
    takeovers = _pending_takeovers_table()
    sql = (
        f"WITH c AS (SELECT {now} AS n) SELECT c.n, "
        + _bounded(f"{live} AND state = 'active' AND due_at_ms > c.n")
        + ", "
        + _bounded(f"{live} AND state = 'active' AND due_at_ms <= c.n AND expires_at_ms > c.n")
        + ", "
        + _bounded(f"{live} AND state = 'jeopardy' AND due_at_ms > c.n")
        + ", "
        + _bounded(f"FROM {t} WHERE state = 'expired' AND ended_at_ms >= c.n - {HOUR_MS}")
        + ", "
        # Expired by time, not yet materialized by a sweep: already expired for humans.
        + _bounded(f"{live} AND due_at_ms <= c.n AND expires_at_ms <= c.n")
        + ", "
        # Over the partial unique index of pending requests (one per work item).
        + (_bounded(f"FROM {takeovers} WHERE status = 'pending'") if takeovers else "NULL")
        + " FROM c"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql)
        n, active, overdue, jeopardy, expired, unswept, pending = cursor.fetchone()
    return int(n), Counters(
        active=int(active),
        jeopardy=min(int(overdue) + int(jeopardy), COUNTER_CAP + 1),
        expired_last_hour=min(int(expired) + int(unswept), COUNTER_CAP + 1),
        pending_takeovers=None if pending is None else int(pending),
    )


def _live_queryset(filters: LiveFilters, now_ms: int) -> QuerySet[Lease]:
    qs = Lease.objects.select_related("work_item__queue", "holder").only(
        "id",
        "epoch",
        "state",
        "grant_kind",
        "granted_at_ms",
        "renewed_at_ms",
        "jeopardy_at_ms",
        "expires_at_ms",
        "due_at_ms",
        "ended_at_ms",
        "end_reason",
        "renew_count",
        "max_gap_ms",
        "jeopardy_after_ms",
        "ttl_ms",
        "work_item__key",
        "work_item__queue__name",
        "holder__name",
        "holder__kind",
    )
    if filters.certainty == "expired":
        qs = qs.filter(state=Lease.State.EXPIRED, ended_at_ms__gte=now_ms - HOUR_MS)
    else:
        qs = qs.filter(state__in=LIVE_STATES)
        # due_at_ms is jeopardy_at_ms while active, expires_at_ms in jeopardy (indexed).
        if filters.certainty == "active":
            qs = qs.filter(state=Lease.State.ACTIVE, due_at_ms__gt=now_ms)
        elif filters.certainty == "jeopardy":
            qs = qs.filter(
                Q(state=Lease.State.JEOPARDY, due_at_ms__gt=now_ms)
                | Q(state=Lease.State.ACTIVE, due_at_ms__lte=now_ms, expires_at_ms__gt=now_ms)
            )
    if filters.queue:
        qs = qs.filter(work_item__queue__name=filters.queue)
    if filters.holder:
        qs = qs.filter(holder__name=filters.holder)
    if filters.q:
        qs = qs.filter(work_item__key__icontains=filters.q)
    return qs


def live_leases(filters: LiveFilters) -> LivePage:
    """The live leases page: 2 queries (clock + counters, then the page).

    Live leases are ordered by `due_at_ms` (the next thing that happens to them: jeopardy
    while active, expiry after), most urgent first, on the partial index `lease_due_idx`;
    the `expired` filter lists the last hour's expiries newest first on `lease_ended_idx`.
    Keyset cursor: "<ms>_<lease id>".
    """
    now_ms, counters = live_counters()
    qs = _live_queryset(filters, now_ms)
    cursor = pair_cursor(filters.cursor, uuid.UUID) if filters.cursor else None
    if filters.certainty == "expired":
        if cursor:
            at, lid = cursor
            # Written so the leading column alone is an index condition.
            qs = qs.filter(Q(ended_at_ms__lt=at) | Q(id__lt=lid), ended_at_ms__lte=at)
        qs = qs.order_by("-ended_at_ms", "-id")
        key = "ended_at_ms"
    else:
        if cursor:
            at, lid = cursor
            # The leading column alone is an index condition; the OR only breaks ties.
            qs = qs.filter(Q(due_at_ms__gt=at) | Q(id__gt=lid), due_at_ms__gte=at)
        qs = qs.order_by("due_at_ms", "id")
        key = "due_at_ms"
    leases, next_cursor = cut_page(
        list(qs[: filters.size + 1]), filters.size, lambda x: f"{getattr(x, key)}_{x.id}"
    )
    rows = [lease_row(lease, now_ms) for lease in leases]
    page = LivePage(filters, rows, next_cursor, now_ms, counters)
    page.version = live_version(page)
    return page


def live_version(page: LivePage) -> str:
    """What the fragment shows, minus the passing of time the browser counts down itself.
    Equal versions mean an identical fragment, so the poll can answer 304."""
    body = {
        "f": page.filters.query(),
        "c": [page.counters.active, page.counters.jeopardy, page.counters.expired_last_hour],
        "t": page.counters.pending_takeovers,
        "n": page.next_cursor,
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
            ]
            for r in page.rows
        ],
    }
    raw = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()[:20]
