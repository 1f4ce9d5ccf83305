"""The live leases page: the counters (selectors/counters.py), a keyset page of leases in a
stable order (work key by default; holder or time left on request), the leases that ended a
moment ago kept in place (greyed, with their end reason) for
LEASEBOARD_DASHBOARD_ENDED_VISIBLE_MS, and the version that lets the polled fragment answer
304. The rows are read as values (rows.LiveLease).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import F, Q, QuerySet

from leaseboard.core.lookups import AnyOf
from leaseboard.core.models import Lease, WorkItem
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.core.sql import POSTGRESQL, prepared_cursor
from leaseboard.dashboard.selectors.counters import COUNTER_CAP, HOUR_MS, Counters, live_counters
from leaseboard.dashboard.selectors.rows import ROW_FIELDS, LeaseRow, LiveLease, lease_row
from leaseboard.domain.text import storable, storable_or_replaced

PAGE_SIZES = (10, 25, 50, 100, 200)
DEFAULT_PAGE_SIZE = 50
CERTAINTY_FILTERS = ("", "active", "jeopardy", "expired")
ENDED_STATES = ("expired", "released", "revoked")

# Sort name -> the lease fields of its order, most significant first; each order ends on
# (work key, epoch), unique per lease, so pages never skip or repeat a row. Every leading
# column has an index for live leases: the work item's key (with the one-live-lease-per-item
# index), the holder's name (with lease_holder_state_idx), due_at_ms (lease_due_idx: the next
# thing that happens to a lease, jeopardy while active, then expiry: its time left).
SORTS: dict[str, tuple[str, ...]] = {
    "key": ("work_item__key", "epoch"),
    "holder": ("holder__name", "work_item__key", "epoch"),
    "due": ("due_at_ms", "work_item__key", "epoch"),
}
SORT_LABELS = {"key": "work key", "holder": "holder", "due": "time left"}
SORT_CHOICES = [
    (prefix + name, label + suffix)
    for name, label in SORT_LABELS.items()
    for prefix, suffix in (("", ""), ("-", " (descending)"))
]


@dataclass(frozen=True)
class LiveFilters:
    certainty: str = ""  # "" = every live lease, and those that ended a moment ago
    queue: str = ""
    holder: str = ""
    q: str = ""  # work key search (substring)
    sort: str = "key"  # a SORTS name, "-" in front for descending
    cursor: str = ""
    first_row: int = 1  # the number of the page's first row, for "rows 51–100 of 1000+"
    size: int = DEFAULT_PAGE_SIZE
    # Only these queues (a person scoped to queues, where other teams' work is hidden:
    # LEASEBOARD_HIDE_OTHER_QUEUES); None: every queue. Set by the view, never the query.
    queues: frozenset[str] | None = None

    @classmethod
    def from_query(cls, params: Any) -> LiveFilters:
        certainty = params.get("certainty", "")
        sort = params.get("sort", "key")
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
            sort=sort if sort.lstrip("-") in SORTS else "key",
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
            "sort": "" if self.sort == "key" else self.sort,
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
        return self.query(sort="" if flip == "key" else flip, cursor="", row="")

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
    total: int  # leases matching the filters (live, and ended a moment ago), up to the cap
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


SEARCH_IDS_CAP = 2000  # matching work items read once, as ids, up to this many


def _matching_items(q: str) -> list[int] | QuerySet[WorkItem, int]:
    """The work items whose key contains `q` (any case). Read once, as ids, when they are
    few: every part of the list and its bounded total then filter on those ids instead of
    each matching the keys again (over the pg_trgm index, core migration 0009). A broad
    search stays a subquery."""
    matching = WorkItem.objects.filter(key__icontains=q).values_list("id", flat=True)
    ids = list(matching[: SEARCH_IDS_CAP + 1])
    return ids if len(ids) <= SEARCH_IDS_CAP else matching


def _parts(filters: LiveFilters, now_ms: int) -> tuple[list[QuerySet[Lease]], bool]:
    """The querysets whose union is the page's list: live leases (narrowed by certainty),
    and with no certainty filter the leases that ended a moment ago; and whether their
    statements may be prepared (_filtered)."""
    qs, prepare = _filtered(filters)
    if filters.certainty == "expired":
        return [qs.filter(state=Lease.State.EXPIRED, ended_at_ms__gte=now_ms - HOUR_MS)], prepare
    live = qs.filter(state__in=LIVE_STATES)
    # due_at_ms is jeopardy_at_ms while active, expires_at_ms in jeopardy (indexed).
    if filters.certainty == "active":
        return [live.filter(state=Lease.State.ACTIVE, due_at_ms__gt=now_ms)], prepare
    if filters.certainty == "jeopardy":
        jeopardy = Q(state=Lease.State.JEOPARDY, due_at_ms__gt=now_ms) | Q(
            state=Lease.State.ACTIVE, due_at_ms__lte=now_ms, expires_at_ms__gt=now_ms
        )
        return [live.filter(jeopardy)], prepare
    window = settings.LEASEBOARD_DASHBOARD_ENDED_VISIBLE_MS
    if not window:
        return [live], prepare
    # Over lease_ended_idx: only the last few moments' endings.
    ended = qs.filter(state__in=ENDED_STATES, ended_at_ms__gte=now_ms - window)
    return [live, ended], prepare


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
    """The live leases page: 3 queries (clock + counters, the page's rows, the bounded
    total), whatever the page size or the number of leases.

    Each part of the list (live; ended a moment ago) is read in the chosen order from its
    keyset cursor with LIMIT size+1, in one UNION ALL; the parts are merged here and cut to
    the page. Keyset cursor: the last row's sort values, encoded.
    """
    now_ms, counters = live_counters()
    fields = SORTS[filters.sort_name]
    order = [F(f).desc() if filters.descending else F(f).asc() for f in fields]
    cursor = decode_cursor(filters.cursor, len(fields))
    parts, prepare = _parts(filters, now_ms)
    limited = []
    for part in parts:
        if cursor:
            part = part.filter(_after(fields, cursor, filters.descending))
        limited.append(part.order_by(*order)[: filters.size + 1])
    if len(limited) == 1:
        values = _prepared_rows(limited[0].values_list(*ROW_FIELDS), prepare)
    elif not connection.features.supports_slicing_ordering_in_compound:
        # SQLite (the embedded default) allows no LIMIT inside a UNION: one query a part.
        values = [row for part in limited for row in part.values_list(*ROW_FIELDS)]
    else:
        ids = limited[0].values("id").union(*[p.values("id") for p in limited[1:]], all=True)
        values = _prepared_rows(Lease.objects.filter(id__in=ids).values_list(*ROW_FIELDS), prepare)
    leases = [LiveLease.from_values(row) for row in values]
    leases.sort(key=lambda x: sort_values(x, fields), reverse=filters.descending)
    page_rows = leases[: filters.size]
    next_cursor = (
        encode_cursor(sort_values(page_rows[-1], fields)) if len(leases) > filters.size else ""
    )
    total = _bounded_total(parts, prepare)
    rows = [lease_row(lease, now_ms) for lease in page_rows]
    page = LivePage(filters, rows, next_cursor, now_ms, counters, total)
    page.version = live_version(page)
    return page


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
            ]
            for r in page.rows
        ],
    }
    raw = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()[:20]
