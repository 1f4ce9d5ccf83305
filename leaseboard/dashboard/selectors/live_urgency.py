"""The urgency sort (the live page's default): a rank (0 in jeopardy by time, 1 on hold,
2 waiting for an approver, 3 healthy), then the expiry for the urgent ranks and the work key
for the healthy rest, read as one indexed part per rank so a page costs what the key sort
costs (docs/benchmarks.md, the dashboard at fleet scale).
"""

from __future__ import annotations

from typing import Any

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

from leaseboard.core.models import Effect, Lease
from leaseboard.dashboard.selectors.counters import Counters
from leaseboard.dashboard.selectors.live_filters import LiveFilters
from leaseboard.dashboard.selectors.live_paging import keyset_after

HEALTHY = 3
KEY_FIELDS = ("work_item__key", "epoch")


def ranks(now_ms: int) -> list[Q]:
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


def urgent(qs: QuerySet[Lease], now_ms: int) -> QuerySet[Lease]:
    """The urgency sort's columns (SORTS["urgency"]) computed for rows read by id (the
    merge of several parts on PostgreSQL), as the parts define them."""
    jeopardy, held, waiting = ranks(now_ms)
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


def due_cut(
    qs: QuerySet[Lease], unranked: QuerySet[Lease], now_ms: int, size: int, descending: bool
) -> QuerySet[Lease]:
    """The jeopardy rank's rows no later than its `size`-th due time (ties included): the
    same first `size` rows in (due, work key, epoch) order, found without the work key.
    In an expiry storm 50,000 leases are in jeopardy, and ordering them by the key joined
    every one to its work item and sorted them all for one page (300-640 ms a statement
    in `make storm`); the cut reads due times alone, then the join and the sort see one
    page of rows. The edge is read first, from the rank's two kinds of rows, each walked
    in due order over its own index for `size` entries: a sweep's marks over
    lease_jeopardy_due_idx, the overdue active leases over lease_due_idx (`unranked`: the
    part before the rank's condition, whose OR would hide both walks). As one condition in
    a subquery, PostgreSQL gathered and sorted every lease in jeopardy for it (12 ms of a
    13 ms page read at 50,000)."""
    order = F("due_at_ms").desc() if descending else F("due_at_ms").asc()
    marked = unranked.filter(state=Lease.State.JEOPARDY)
    overdue = unranked.filter(state=Lease.State.ACTIVE, due_at_ms__lte=now_ms)
    walks = [
        rows.order_by(order).values_list("due_at_ms", flat=True)[:size]
        for rows in (marked, overdue)
    ]
    if connection.features.supports_slicing_ordering_in_compound:
        dues = list(walks[0].union(walks[1], all=True))
    else:  # SQLite: no LIMIT inside a UNION
        dues = [due for walk in walks for due in walk]
    if len(dues) < size:
        return qs  # fewer rows than a page: no cut
    edge = sorted(dues, reverse=descending)[size - 1]
    return qs.filter(due_at_ms__gte=edge) if descending else qs.filter(due_at_ms__lte=edge)


def jeopardy_fills_page(filters: LiveFilters, counters: Counters) -> bool:
    """Whether the live leases in jeopardy by time (counted on the counters' clock, before
    any filter) may be more than a page: the jeopardy rank is then cut at its page-th due
    time (`due_cut`) and, sorted most urgent first, read before the other ranks."""
    return counters.urgent >= filters.size + 1


def urgency_ranked(
    parts: list[QuerySet[Lease]],
    filters: LiveFilters,
    now_ms: int,
    cursor: list[Any] | None,
    counters: Counters,
) -> list[tuple[int, QuerySet[Any]]]:
    """The urgency sort without ranking every live lease: each part splits by rank into
    four, each read in an indexed order with LIMIT size+1 (in jeopardy by due_at_ms over
    lease_due_idx: the expiry of a lease a sweep marked; on hold and waiting by expiry,
    few; the healthy rest by work key), so a page costs what the key sort costs. (Ranking
    and sorting 58k live leases in one statement took 530 ms at p50; docs/benchmarks.md.)
    The cursor's rank says which parts are behind it (skipped), which one it is in
    (read after it) and which are ahead (read whole). Returns (rank, part) pairs."""
    desc = filters.descending
    size = filters.size + 1
    rank = cursor[0] if cursor else None
    out: list[tuple[int, QuerySet[Any]]] = []
    for part in parts:
        if filters.certainty in ("expired", "ended"):  # nothing live: all "healthy"
            split = [(HEALTHY, part)]
        else:
            conditions = ranks(now_ms)
            split = [(r, part.filter(q)) for r, q in enumerate(conditions)]
            healthy = part
            for q in conditions:
                healthy = healthy.exclude(q)
            split.append((HEALTHY, healthy))
        for r, qs in split:
            if rank is not None and (rank > r if not desc else rank < r):
                continue  # behind the cursor
            if r == 0 and not counters.urgent:
                continue  # nothing in jeopardy (the counters' same clock): no index walk
            due = "due_at_ms" if r == 0 else "expires_at_ms"
            own = KEY_FIELDS if r == HEALTHY else (due, *KEY_FIELDS)
            qs = qs.annotate(
                urgency=Value(r, output_field=IntegerField()),
                urgent_due=(Value(0, output_field=BigIntegerField()) if r == HEALTHY else F(due)),
            )
            unranked = part
            if rank == r:
                after = (cursor or [])[2:] if r == HEALTHY else (cursor or [])[1:]
                qs = qs.filter(keyset_after(own, after, desc))
                unranked = part.filter(keyset_after(own, after, desc))
            if r == 0 and jeopardy_fills_page(filters, counters):
                # More may be in jeopardy than a page shows.
                qs = due_cut(qs, unranked, now_ms, size, desc)
            order = [F(f).desc() if desc else F(f).asc() for f in own]
            out.append((r, qs.order_by(*order)[:size]))
    return out
