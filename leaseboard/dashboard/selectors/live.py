"""The live leases page: the counters (selectors/counters.py), a keyset page of live leases,
most urgent first by default (in jeopardy, on hold, waiting for an approver, then the
healthy rest by work key; or by work key, holder or time left on request), the leases that
ended in the last LEASEBOARD_DASHBOARD_ENDED_VISIBLE_MS in a section of their own below
(greyed, with their end reason), and the version that lets the polled fragment answer 304.
The rows are read as values (rows.LiveLease).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlencode

from django.apps import apps
from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import (
    BigIntegerField,
    Case,
    F,
    IntegerField,
    Q,
    QuerySet,
    Value,
    When,
)

from leaseboard.core.lookups import AnyOf
from leaseboard.core.models import Effect, Lease, WorkItem
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.core.paging import page_version
from leaseboard.core.sql import POSTGRESQL, prepared_cursor
from leaseboard.dashboard.selectors.counters import COUNTER_CAP, HOUR_MS, Counters, live_counters
from leaseboard.dashboard.selectors.rows import (
    ROW_FIELDS,
    LeaseRow,
    LiveLease,
    PendingTakeover,
    lease_row,
)
from leaseboard.domain.text import storable, storable_or_replaced

PAGE_SIZES = (10, 25, 50, 100, 200)
DEFAULT_PAGE_SIZE = 50
CERTAINTY_FILTERS = ("", "active", "jeopardy", "expired", "ended")
ENDED_STATES = ("expired", "released", "revoked")
ENDED_SHOWN = 20  # rows of the "ended a moment ago" section (the "ended" filter pages all)
DEFAULT_SORT = "urgency"

# Sort name -> the lease fields of its order, most significant first; each order ends on
# (work key, epoch), unique per lease, so pages never skip or repeat a row. Every leading
# column has an index for live leases: the work item's key (with the one-live-lease-per-item
# index), the holder's name (with lease_holder_state_idx), due_at_ms (lease_due_idx: the next
# thing that happens to a lease, jeopardy while active, then expiry: its time left).
#
# "urgency" (the default) is computed: a rank (0 in jeopardy by time, 1 on hold, 2 waiting for
# an approver, 3 healthy), then the expiry for the first three ranks (soonest first: they
# need a person; in jeopardy, due_at_ms, which is the expiry once a sweep marked it), and
# the work key for the healthy rest (so rows do not move at every renewal); read as one
# part per rank (_urgency_limited), each over an index.
SORTS: dict[str, tuple[str, ...]] = {
    "urgency": ("urgency", "urgent_due", "work_item__key", "epoch"),
    "key": ("work_item__key", "epoch"),
    "holder": ("holder__name", "work_item__key", "epoch"),
    "due": ("due_at_ms", "work_item__key", "epoch"),
}
SORT_LABELS = {
    "urgency": "urgency",
    "key": "work key",
    "holder": "holder",
    "due": "time left",
}
SORT_CHOICES = [
    (prefix + name, label + suffix)
    for name, label in SORT_LABELS.items()
    for prefix, suffix in (("", ""), ("-", " (descending)"))
]


@dataclass(frozen=True)
class LiveFilters:
    certainty: str = ""  # "" = every live lease (and a section of those that just ended)
    queue: str = ""
    holder: str = ""
    q: str = ""  # work key search (substring)
    sort: str = DEFAULT_SORT  # a SORTS name, "-" in front for descending
    cursor: str = ""
    first_row: int = 1  # the number of the page's first row, for "rows 51–100 of 1000+"
    size: int = DEFAULT_PAGE_SIZE
    # Only these queues (a person scoped to queues, where other teams' work is hidden:
    # LEASEBOARD_HIDE_OTHER_QUEUES); None: every queue. Set by the view, never the query.
    queues: frozenset[str] | None = None

    @classmethod
    def from_query(cls, params: Any) -> LiveFilters:
        certainty = params.get("certainty", "")
        sort = params.get("sort", DEFAULT_SORT)
        try:
            size = int(params.get("size", DEFAULT_PAGE_SIZE))
        except (TypeError, ValueError):
            size = DEFAULT_PAGE_SIZE
        try:
            first_row = max(1, int(params.get("row", 1)))
        except (TypeError, ValueError):
            first_row = 1
        return cls(
            certainty=certainty if certainty in CERTAINTY_FILTERS else "",
            # A NUL would reach PostgreSQL as a query parameter and fail there; replaced, it
            # simply matches nothing (no stored name or key can hold one).
            queue=storable_or_replaced(params.get("queue", "").strip()[:100]),
            holder=storable_or_replaced(params.get("holder", "").strip()[:150]),
            q=storable_or_replaced(params.get("q", "").strip()[:200]),
            sort=sort if sort.lstrip("-") in SORTS else DEFAULT_SORT,
            cursor=params.get("cursor", "").strip()[:400],
            first_row=first_row,
            size=min(max(size, 1), max(PAGE_SIZES)),
        )

    @property
    def sort_name(self) -> str:
        return self.sort.lstrip("-")

    @property
    def descending(self) -> bool:
        return self.sort.startswith("-")

    def query(self, **changes: Any) -> dict[str, str]:
        """Query-string parameters for these filters (with `changes`), empty ones omitted."""
        values = {
            "certainty": self.certainty,
            "queue": self.queue,
            "holder": self.holder,
            "q": self.q,
            "sort": "" if self.sort == DEFAULT_SORT else self.sort,
            "cursor": self.cursor,
            "row": "" if self.first_row == 1 else str(self.first_row),
            "size": "" if self.size == DEFAULT_PAGE_SIZE else str(self.size),
        }
        values.update({k: str(v) for k, v in changes.items()})
        return {k: v for k, v in values.items() if v}

    def sorted_by(self, name: str) -> dict[str, str]:
        """The query for sorting by `name`: ascending first, descending on a second click;
        back to the first page."""
        flip = "-" + name if self.sort == name else name
        return self.query(sort="" if flip == DEFAULT_SORT else flip, cursor="", row="")

    @property
    def sort_links(self) -> dict[str, dict[str, str]]:
        """Per sortable column: the query string that sorts by it, and its aria-sort."""
        out = {}
        for name in SORTS:
            current = self.sort_name == name
            direction = "descending" if self.descending else "ascending"
            out[name] = {
                "query": "?" + urlencode(self.sorted_by(name)),
                "aria": direction if current else "none",
            }
        return out

    @property
    def sort_label(self) -> str:
        return SORT_LABELS[self.sort_name] + (" (descending)" if self.descending else "")


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


def _filtered(filters: LiveFilters) -> tuple[QuerySet[Lease], bool]:
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
    return _filtered(filters)[0]


SEARCH_IDS_CAP = 2000  # matching work items read once, as ids, up to this many


def _matching_items(q: str) -> list[int] | QuerySet[WorkItem, int]:
    """The work items whose key contains `q` (any case). Read once, as ids, when they are
    few: every part of the list and its bounded total then filter on those ids instead of
    each matching the keys again (over the pg_trgm index, core migration 0009). A broad
    search stays a subquery."""
    matching = WorkItem.objects.filter(key__icontains=q).values_list("id", flat=True)
    ids = list(matching[: SEARCH_IDS_CAP + 1])
    return ids if len(ids) <= SEARCH_IDS_CAP else matching


def _ranks(now_ms: int) -> list[Q]:
    """The conditions of the urgent ranks, each excluding the ranks before it: 0 in
    jeopardy by time, 1 on hold (the live lease carries its item's hold), 2 with an effect
    waiting for an approver. Rank 3, healthy, is none of them."""
    now = Value(now_ms, output_field=BigIntegerField())
    jeopardy = Q(state=Lease.State.JEOPARDY) | Q(state=Lease.State.ACTIVE, due_at_ms__lte=now)
    # The item's hold (over work_item_held_idx, few rows); a live lease carries a copy.
    held = Q(work_item__held_at_ms__isnull=False)
    waiting = Q(
        id__in=Effect.objects.filter(
            decision=Effect.Decision.PENDING_APPROVAL.value, lease_id__isnull=False
        ).values("lease_id")
    )
    return [jeopardy, held & ~jeopardy, waiting & ~held & ~jeopardy]


def _urgent(qs: QuerySet[Lease], now_ms: int) -> QuerySet[Lease]:
    """The urgency sort's columns (SORTS["urgency"]) computed for rows read by id (the
    merge of several parts on PostgreSQL), as the parts define them."""
    jeopardy, held, waiting = _ranks(now_ms)
    return qs.annotate(
        urgency=Case(
            When(jeopardy, then=Value(0)),
            When(held, then=Value(1)),
            When(waiting, then=Value(2)),
            default=Value(HEALTHY),
            output_field=IntegerField(),
        )
    ).annotate(
        urgent_due=Case(
            When(urgency=0, then=F("due_at_ms")),
            When(urgency__lt=HEALTHY, then=F("expires_at_ms")),
            default=Value(0, output_field=BigIntegerField()),
            output_field=BigIntegerField(),
        )
    )


HEALTHY = 3
KEY_FIELDS = ("work_item__key", "epoch")


def _urgency_limited(
    parts: list[QuerySet[Lease]],
    filters: LiveFilters,
    now_ms: int,
    cursor: list[Any] | None,
    counters: Counters,
) -> list[QuerySet[Any]]:
    """The urgency sort without ranking every live lease: each part splits by rank into
    four, each read in an indexed order with LIMIT size+1 (in jeopardy by due_at_ms over
    lease_due_idx: the expiry of a lease a sweep marked; on hold and waiting by expiry,
    few; the healthy rest by work key), so a page costs what the key sort costs. (Ranking
    and sorting 58k live leases in one statement took 530 ms at p50; docs/benchmarks.md.)
    The cursor's rank says which parts are behind it (skipped), which one it is in
    (read after it) and which are ahead (read whole)."""
    desc = filters.descending
    size = filters.size + 1
    rank = cursor[0] if cursor else None
    out: list[QuerySet[Any]] = []
    for part in parts:
        if filters.certainty in ("expired", "ended"):  # nothing live: all "healthy"
            split = [(HEALTHY, part)]
        else:
            conditions = _ranks(now_ms)
            split = [(r, part.filter(q)) for r, q in enumerate(conditions)]
            healthy = part
            for q in conditions:
                healthy = healthy.exclude(q)
            split.append((HEALTHY, healthy))
        for r, qs in split:
            if rank is not None and (rank > r if not desc else rank < r):
                continue  # behind the cursor
            if r == 0 and not (counters.jeopardy or counters.unswept):
                continue  # nothing in jeopardy (the counters' same clock): no index walk
            due = "due_at_ms" if r == 0 else "expires_at_ms"
            own = KEY_FIELDS if r == HEALTHY else (due, *KEY_FIELDS)
            qs = qs.annotate(
                urgency=Value(r, output_field=IntegerField()),
                urgent_due=(Value(0, output_field=BigIntegerField()) if r == HEALTHY else F(due)),
            )
            if rank == r:
                after = (cursor or [])[2:] if r == HEALTHY else (cursor or [])[1:]
                qs = qs.filter(_after(own, after, desc))
            order = [F(f).desc() if desc else F(f).asc() for f in own]
            out.append(qs.order_by(*order)[:size])
    return out


def _parts(filters: LiveFilters, now_ms: int) -> tuple[list[QuerySet[Lease]], bool]:
    """The querysets whose union is the page's list: live leases (narrowed by certainty),
    or the leases that ended; and whether their statements may be prepared (_filtered)."""
    qs, prepare = _filtered(filters)
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


def _recently_ended(filters: LiveFilters, now_ms: int) -> list[LiveLease]:
    """The default view's section below the live leases: the last few moments' endings
    (over lease_ended_idx), newest first; on the first page only."""
    window = settings.LEASEBOARD_DASHBOARD_ENDED_VISIBLE_MS
    if filters.certainty or filters.cursor or not window:
        return []
    qs, _ = _filtered(filters)
    ended = qs.filter(state__in=ENDED_STATES, ended_at_ms__gte=now_ms - window)
    rows = ended.order_by("-ended_at_ms", "work_item__key").values_list(*ROW_FIELDS)
    return [LiveLease.from_values(row) for row in rows[:ENDED_SHOWN]]


def encode_cursor(values: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")


def decode_cursor(raw: str, width: int) -> list[Any] | None:
    if not raw:
        return None
    try:
        values = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (ValueError, binascii.Error):
        return None
    if not isinstance(values, list) or len(values) != width:
        return None
    if not all(isinstance(v, str | int) and not isinstance(v, bool) for v in values):
        return None
    if not all(storable(v) for v in values if isinstance(v, str)):
        return None  # a NUL names no stored key, and PostgreSQL refuses the parameter
    return values


def _after(fields: tuple[str, ...], values: list[Any], descending: bool) -> Q:
    """Rows strictly after `values` in the order of `fields` (a keyset condition), with the
    leading column alone as an index range."""
    op = "lt" if descending else "gt"
    cond = Q(**{f"{fields[-1]}__{op}": values[-1]})
    for name, value in zip(reversed(fields[:-1]), reversed(values[:-1]), strict=True):
        cond = Q(**{f"{name}__{op}": value}) | (Q(**{name: value}) & cond)
    return cond & Q(**{f"{fields[0]}__{op}e": values[0]})


def sort_values(lease: LiveLease, fields: tuple[str, ...]) -> list[Any]:
    out: list[Any] = []
    for name in fields:
        obj: Any = lease
        for part in name.split("__"):
            obj = getattr(obj, part)
        out.append(obj)
    return out


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
    parts, prepare = _parts(filters, now_ms)
    urgency = filters.sort_name == "urgency"
    columns = (*ROW_FIELDS, "urgency", "urgent_due") if urgency else ROW_FIELDS
    if urgency:
        limited = _urgency_limited(parts, filters, now_ms, cursor, counters)
        # Not prepared: a generic plan, blind to the clock parameter, reads the jeopardy
        # rank's `due_at_ms <= now` as a large range (600 ms a page at 100k leases against
        # 30 ms planned for the value).
        prepare = False
    else:
        limited = []
        for part in parts:
            if cursor:
                part = part.filter(_after(fields, cursor, filters.descending))
            limited.append(part.order_by(*order)[: filters.size + 1])
    if not limited:
        values = []
    elif len(limited) == 1:
        values = _prepared_rows(limited[0].values_list(*columns), prepare)
    elif not connection.features.supports_slicing_ordering_in_compound:
        # SQLite (the embedded default) allows no LIMIT inside a UNION: one query a part.
        values = [row for part in limited for row in part.values_list(*columns)]
    else:
        ids = limited[0].values("id").union(*[p.values("id") for p in limited[1:]], all=True)
        listed = Lease.objects.filter(id__in=ids)
        listed = _urgent(listed, now_ms) if urgency else listed
        values = _prepared_rows(listed.values_list(*columns), prepare)
    leases = [LiveLease.from_values(row) for row in values]
    leases.sort(key=lambda x: sort_values(x, fields), reverse=filters.descending)
    page_rows = leases[: filters.size]
    next_cursor = (
        encode_cursor(sort_values(page_rows[-1], fields)) if len(leases) > filters.size else ""
    )
    total = _bounded_total(parts, prepare)
    rows = _with_pending([lease_row(lease, now_ms) for lease in page_rows], counters)
    ended = [lease_row(lease, now_ms) for lease in _recently_ended(filters, now_ms)]
    page = LivePage(filters, rows, next_cursor, now_ms, counters, total, ended)
    page.version = live_version(page)
    return page


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


def _bounded_total(parts: list[QuerySet[Lease]], prepare: bool) -> int:
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


def _prepared_rows(
    values: QuerySet[Lease, tuple[Any, ...]], prepare: bool
) -> list[tuple[Any, ...]]:
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


def live_version(page: LivePage) -> str:
    """What the fragment shows, minus the passing of time the browser counts down itself.
    Equal versions mean an identical fragment, so the poll can answer 304."""
    body = {
        "f": page.filters.query(),
        "c": [page.counters.active, page.counters.jeopardy, page.counters.expired_last_hour],
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
