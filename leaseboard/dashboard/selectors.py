"""Dashboard reads. Each function runs a fixed number of queries whatever the page size:
related rows come through select_related, lists are keyset-paginated on indexed columns,
and counters are bounded (`LIMIT cap+1` under the count), never an exact COUNT(*) over a
big table. Certainty is computed from the stored times and the database clock, so a page
shows an expiry the instant it happens, before any sweep writes it down. Nothing here
writes.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet

from leaseboard.core.clock import now_ms_sql
from leaseboard.core.models import Alert, AuditEntry, Checkpoint, Effect, Executor, Lease, WorkItem
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.domain.certainty import Certainty, LeaseTimes, state_at
from leaseboard.takeovers.models import TakeoverRequest

# Counters are exact up to this many, then shown as "1000+": each is a bounded scan.
COUNTER_CAP = 1_000
BADGE_CAP = 99
HOUR_MS = 3_600_000
PAGE_SIZES = (10, 25, 50, 100, 200)
DEFAULT_PAGE_SIZE = 50
CERTAINTY_FILTERS = ("", "active", "jeopardy", "expired")


def certainty_of(lease: Lease, now_ms: int) -> str:
    return state_at(
        LeaseTimes(Certainty(lease.state), lease.jeopardy_at_ms, lease.expires_at_ms), now_ms
    ).value


# --------------------------------------------------------------------------- live leases


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
            queue=params.get("queue", "").strip()[:100],
            holder=params.get("holder", "").strip()[:150],
            q=params.get("q", "").strip()[:200],
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
class LeaseRow:
    lease: Lease
    certainty: str
    expires_in_ms: int
    jeopardy_in_ms: int


@dataclass(frozen=True)
class Counters:
    active: int
    jeopardy: int
    expired_last_hour: int
    # Filled by the takeover workflow (issue 5); None renders as "—".
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


def live_counters() -> tuple[int, Counters]:
    """The database clock and the page counters in one query. Each count stops at
    COUNTER_CAP+1 rows, so its cost is bounded however many leases exist."""
    t = Lease._meta.db_table
    now = now_ms_sql()
    # Every live count ranges over the partial index lease_due_idx (due_at_ms, live states):
    # due_at_ms is jeopardy_at_ms while active and expires_at_ms once in jeopardy, so each
    # condition below has an index range even when few rows match.
    live = f"FROM {t} WHERE state IN ('active', 'jeopardy')"
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
        + _bounded(f"FROM {TakeoverRequest._meta.db_table} WHERE status = 'pending'")
        + " FROM c"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql)
        n, active, overdue, jeopardy, expired, unswept, takeovers = cursor.fetchone()
    return int(n), Counters(
        active=int(active),
        jeopardy=min(int(overdue) + int(jeopardy), COUNTER_CAP + 1),
        expired_last_hour=min(int(expired) + int(unswept), COUNTER_CAP + 1),
        pending_takeovers=int(takeovers),
    )


def _parse_cursor(raw: str) -> tuple[int, uuid.UUID] | None:
    head, _, tail = raw.partition("_")
    try:
        return int(head), uuid.UUID(tail)
    except ValueError:
        return None


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
    cursor = _parse_cursor(filters.cursor) if filters.cursor else None
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
    leases = list(qs[: filters.size + 1])
    next_cursor = ""
    if len(leases) > filters.size:
        leases = leases[: filters.size]
        last = leases[-1]
        next_cursor = f"{getattr(last, key)}_{last.id}"
    rows = [
        LeaseRow(
            lease=lease,
            certainty=certainty_of(lease, now_ms),
            expires_in_ms=max(0, lease.expires_at_ms - now_ms),
            jeopardy_in_ms=max(0, lease.jeopardy_at_ms - now_ms),
        )
        for lease in leases
    ]
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


# --------------------------------------------------------------------------- alerts


def alert_badge_count() -> int:
    """Open, unacknowledged alerts, counted up to BADGE_CAP+1 (one query)."""
    return (
        Alert.objects.filter(resolved_at_ms__isnull=True, acknowledged_at_ms__isnull=True)
        .order_by()
        .values("id")[: BADGE_CAP + 1]
        .count()
    )


@dataclass
class AlertPage:
    alerts: list[Alert]
    next_cursor: str
    show: str
    now_ms: int


def alerts_list(*, show: str = "open", cursor: str = "", size: int = 50) -> AlertPage:
    """Open alerts newest first (partial index `alert_open_idx`), or all alerts; 2 queries."""
    from leaseboard.core.clock import db_now_ms

    now_ms = db_now_ms()
    qs = Alert.objects.select_related("work_item", "lease__holder", "acknowledged_by").order_by(
        "-opened_at_ms", "-id"
    )
    if show != "all":
        show = "open"
        qs = qs.filter(resolved_at_ms__isnull=True)
    parsed = _parse_int_cursor(cursor)
    if parsed:
        at, aid = parsed
        qs = qs.filter(Q(opened_at_ms__lt=at) | Q(opened_at_ms=at, id__lt=aid))
    alerts = list(qs[: size + 1])
    next_cursor = ""
    if len(alerts) > size:
        alerts = alerts[:size]
        next_cursor = f"{alerts[-1].opened_at_ms}_{alerts[-1].id}"
    return AlertPage(alerts, next_cursor, show, now_ms)


def _parse_int_cursor(raw: str) -> tuple[int, int] | None:
    head, _, tail = raw.partition("_")
    try:
        return int(head), int(tail)
    except ValueError:
        return None


# --------------------------------------------------------------------------- work item

TIMELINE_LIMIT = 50
EFFECT_LIMIT = 100
CHECKPOINT_LIMIT = 10
ALERT_LIMIT = 50
AUDIT_LIMIT = 50


@dataclass(frozen=True)
class GapPoint:
    at_ms: int
    gap_ms: int


@dataclass
class RenewalHistory:
    lease: Lease
    times: list[int]
    gaps: list[GapPoint]
    threshold_ms: int  # jeopardy_after_ms: a gap at or past this means jeopardy
    ttl_ms: int
    chart: dict[str, Any]


@dataclass
class WorkItemPage:
    item: WorkItem
    now_ms: int
    leases: list[LeaseRow]
    live: LeaseRow | None
    renewals: RenewalHistory | None
    effects: list[Effect]
    checkpoints: list[Checkpoint]
    alerts: list[Alert]
    audit: list[AuditEntry]


def renewal_history(lease: Lease) -> RenewalHistory:
    """Recent renewals from the lease row's bounded window, with the gap before each
    (the first measured from the grant) and an SVG-ready chart against the threshold."""
    times = lease.recent_renewal_times()
    gaps: list[GapPoint] = []
    prev: int | None = None
    if lease.renew_count <= len(times):
        prev = lease.granted_at_ms  # the window still holds every renewal since the grant
    for t in times:
        if prev is not None:
            gaps.append(GapPoint(t, t - prev))
        prev = t
    return RenewalHistory(
        lease=lease,
        times=times,
        gaps=gaps,
        threshold_ms=lease.jeopardy_after_ms,
        ttl_ms=lease.ttl_ms,
        chart=gap_chart(gaps, lease.jeopardy_after_ms, lease.ttl_ms),
    )


def gap_chart(
    gaps: list[GapPoint], threshold_ms: int, ttl_ms: int, width: int = 320, height: int = 80
) -> dict[str, Any]:
    """Bar geometry for an inline SVG: one bar per gap, a line at the jeopardy threshold."""
    top = max([threshold_ms, ttl_ms, *[g.gap_ms for g in gaps]] or [1]) or 1
    n = max(len(gaps), 1)
    slot = width / n
    bars = []
    for i, g in enumerate(gaps):
        h = round(g.gap_ms / top * (height - 4), 1)
        bars.append(
            {
                "x": round(i * slot + 1, 1),
                "y": round(height - h, 1),
                "w": round(max(slot - 2, 1), 1),
                "h": h,
                "over": g.gap_ms >= threshold_ms,
                "gap_ms": g.gap_ms,
            }
        )
    return {
        "width": width,
        "height": height,
        "bars": bars,
        "threshold_y": round(height - threshold_ms / top * (height - 4), 1),
        "threshold_ms": threshold_ms,
    }


def work_item_page(*, key: str, lease_id: str = "") -> WorkItemPage | None:
    """Everything about one work item in 7 queries, each list bounded."""
    from leaseboard.core.clock import db_now_ms

    item = WorkItem.objects.select_related("queue").filter(key=key).first()
    if item is None:
        return None
    now_ms = db_now_ms()
    leases = list(
        Lease.objects.select_related("holder", "ended_by")
        .filter(work_item=item)
        .order_by("-epoch")[:TIMELINE_LIMIT]
    )
    rows = [
        LeaseRow(
            lease=lease,
            certainty=certainty_of(lease, now_ms),
            expires_in_ms=max(0, lease.expires_at_ms - now_ms),
            jeopardy_in_ms=max(0, lease.jeopardy_at_ms - now_ms),
        )
        for lease in leases
    ]
    live = next((r for r in rows if r.lease.state in LIVE_STATES), None)
    chosen = next((r.lease for r in rows if str(r.lease.id) == lease_id), None)
    if chosen is None and rows:
        chosen = rows[0].lease
    effects = list(
        Effect.objects.select_related("executor", "lease")
        .defer("payload", "fencing_token", "lease__recent_renewals")
        .filter(work_item=item)
        .order_by("-proposed_at_ms", "-id")[:EFFECT_LIMIT]
    )
    checkpoints = list(
        Checkpoint.objects.filter(work_item=item).order_by("-seq")[:CHECKPOINT_LIMIT]
    )
    alerts = list(
        Alert.objects.select_related("acknowledged_by")
        .filter(work_item=item)
        .order_by("-opened_at_ms", "-id")[:ALERT_LIMIT]
    )
    audit = list(AuditEntry.objects.filter(work_item=item).order_by("-seq")[:AUDIT_LIMIT])
    return WorkItemPage(
        item=item,
        now_ms=now_ms,
        leases=rows,
        live=live,
        renewals=renewal_history(chosen) if chosen else None,
        effects=effects,
        checkpoints=checkpoints,
        alerts=alerts,
        audit=audit,
    )


# --------------------------------------------------------------------------- executor

EXECUTOR_LEASE_LIMIT = 50
EXECUTOR_REFUSAL_LIMIT = 50


@dataclass
class ExecutorPage:
    executor: Executor
    now_ms: int
    live: list[LeaseRow]
    recent: list[LeaseRow]
    refusals: list[Effect]
    health: dict[str, Any]


def executor_page(*, executor_id: int) -> ExecutorPage | None:
    """An executor's live and recent leases, renewal health and refusals; 5 queries."""
    from leaseboard.core.clock import db_now_ms

    executor = Executor.objects.filter(id=executor_id).first()
    if executor is None:
        return None
    now_ms = db_now_ms()
    base = Lease.objects.select_related("work_item").defer("work_item__scope")
    live = list(
        base.filter(holder=executor, state__in=LIVE_STATES).order_by("due_at_ms", "id")[
            :EXECUTOR_LEASE_LIMIT
        ]
    )
    recent = list(
        base.filter(holder=executor)
        .exclude(state__in=LIVE_STATES)
        .order_by("-ended_at_ms", "-id")[:EXECUTOR_LEASE_LIMIT]
    )
    refusals = list(
        Effect.objects.select_related("work_item")
        .defer("payload", "fencing_token")
        .filter(executor=executor, decision=Effect.Decision.REFUSED)
        .order_by("-proposed_at_ms", "-id")[:EXECUTOR_REFUSAL_LIMIT]
    )

    def row(lease: Lease) -> LeaseRow:
        return LeaseRow(
            lease,
            certainty_of(lease, now_ms),
            max(0, lease.expires_at_ms - now_ms),
            max(0, lease.jeopardy_at_ms - now_ms),
        )

    live_rows = [row(x) for x in live]
    recent_rows = [row(x) for x in recent]
    ended = [r.lease.state for r in recent_rows]
    health = {
        "live": len(live_rows),
        "in_jeopardy": sum(1 for r in live_rows if r.certainty != "active"),
        "worst_gap_ms": max((r.lease.max_gap_ms for r in live_rows + recent_rows), default=0),
        "renewals": sum(r.lease.renew_count for r in live_rows + recent_rows),
        "recent_expired": ended.count("expired"),
        "recent_released": ended.count("released"),
        "recent_revoked": ended.count("revoked"),
        "recent_ended": len(ended),
    }
    return ExecutorPage(executor, now_ms, live_rows, recent_rows, refusals, health)


# --------------------------------------------------------------------------- audit


@dataclass
class AuditPage:
    entries: list[AuditEntry]
    next_cursor: str


def audit_log(*, cursor: str = "", size: int = 50) -> AuditPage:
    """The audit log newest first, keyset on the unique `seq`; 1 query."""
    qs = AuditEntry.objects.select_related("work_item").order_by("-seq")
    try:
        before = int(cursor) if cursor else None
    except ValueError:
        before = None
    if before is not None:
        qs = qs.filter(seq__lt=before)
    entries = list(qs[: size + 1])
    next_cursor = ""
    if len(entries) > size:
        entries = entries[:size]
        next_cursor = str(entries[-1].seq)
    return AuditPage(entries, next_cursor)


def alert_for_row(alert_id: int) -> Alert | None:
    return (
        Alert.objects.select_related("work_item", "lease__holder", "acknowledged_by")
        .filter(id=alert_id)
        .first()
    )
