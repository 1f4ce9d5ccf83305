"""Blocked work: open work items with effects of no known outcome and nobody holding them
(docs/design.md §6). No agent may acquire them (by default) and nobody may complete them
until a person takes them over and reconciles; the live page counts them, this page lists
them, each with its effects, its last holder and any takeover already waiting.

The takeover workflow's table is found by app label, as the live page's counters find it,
so the dashboard imports nothing from that app.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.apps import apps
from django.db.models import Exists, F, Min, OuterRef, Q

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Effect, Lease, WorkItem
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.domain import reconciliation as rc
from leaseboard.domain.text import filter_text

BLOCKED_PAGE = 100

# An effect nobody knows the outcome of: the reconciliation gate's question.
OPEN_EFFECT = Q(
    decision=rc.Decision.AUTHORIZED.value,
    resolution="",
    outcome__in=["", rc.Outcome.UNKNOWN.value],
)


def _live_lease(now_ms: int) -> Exists:
    return Exists(
        Lease.objects.filter(
            work_item_id=OuterRef("work_item_id"),
            state__in=LIVE_STATES,
            expires_at_ms__gt=now_ms,
        )
    )


@dataclass(frozen=True)
class BlockedFilters:
    queue: str = ""
    q: str = ""

    @classmethod
    def from_query(cls, params: Any) -> BlockedFilters:
        # deliberate: each filter read one a line, as other pages' filters.
        return cls(
            queue=filter_text(params, "queue", 100),
            q=filter_text(params, "q", 200),
        )

    def query(self) -> dict[str, str]:
        return {k: v for k, v in {"queue": self.queue, "q": self.q}.items() if v}


@dataclass
class BlockedItem:
    key: str
    queue: str
    epoch: int
    held: bool
    blocked_since_ms: int  # the oldest effect with no known outcome was proposed then
    effects: list[Effect] = field(default_factory=list)
    last_lease: Lease | None = None
    pending_takeover_id: int | None = None
    pending_takeover_by: str = ""


@dataclass
class BlockedPage:
    filters: BlockedFilters
    items: list[BlockedItem]
    more: bool
    now_ms: int


def blocked_items(filters: BlockedFilters, *, limit: int = BLOCKED_PAGE) -> BlockedPage:
    """The blocked items, longest blocked first: 4 queries (items, their effects, their
    current leases, pending takeovers), whatever the page holds."""
    now = db_now_ms()
    rows, more = _blocked_since(filters, now, limit)
    out = _items(rows)
    ids = list(out)
    _with_effects(out, ids)
    _with_last_leases(out, ids)
    _with_pending_takeovers(out, ids)
    return BlockedPage(filters, list(out.values()), more, now)


def _blocked_since(
    filters: BlockedFilters, now: int, limit: int
) -> tuple[list[dict[str, Any]], bool]:
    """The page's work items (as ids) and since when each is blocked, longest first, and
    whether more follow."""
    effects = Effect.objects.filter(OPEN_EFFECT).filter(~_live_lease(now))
    if filters.queue:
        effects = effects.filter(work_item__queue__name=filters.queue)
    if filters.q:
        effects = effects.filter(work_item__key__icontains=filters.q)
    rows = list(
        effects.values("work_item_id")
        .annotate(since=Min("proposed_at_ms"))
        .order_by("since", "work_item_id")[: limit + 1]
    )
    return rows[:limit], len(rows) > limit


def _items(rows: list[dict[str, Any]]) -> dict[int, BlockedItem]:
    """One BlockedItem per row, in the rows' order (one query for the work items)."""
    items = {
        w.id: w
        for w in WorkItem.objects.filter(id__in=[r["work_item_id"] for r in rows])
        .select_related("queue")
        .only("id", "key", "epoch", "held_at_ms", "queue__name")
    }
    out: dict[int, BlockedItem] = {}
    for r in rows:
        w = items[r["work_item_id"]]
        out[w.id] = BlockedItem(
            key=w.key,
            queue=w.queue.name,
            epoch=w.epoch,
            held=w.held_at_ms is not None,
            blocked_since_ms=r["since"],
        )
    return out


def _with_effects(out: dict[int, BlockedItem], ids: list[int]) -> None:
    """Each item's effects of no known outcome, oldest first (one query)."""
    for e in (
        Effect.objects.filter(OPEN_EFFECT, work_item_id__in=ids)
        .select_related("executor")
        .only(
            "id",
            "work_item_id",
            "kind",
            "target",
            "epoch",
            "outcome",
            "proposed_at_ms",
            "payload",
            "executor__name",
        )
        .order_by("proposed_at_ms")
    ):
        out[e.work_item_id].effects.append(e)


def _with_last_leases(out: dict[int, BlockedItem], ids: list[int]) -> None:
    """Each item's lease at its current epoch, with its holder (one query)."""
    for lease in Lease.objects.filter(
        work_item_id__in=ids, epoch=F("work_item__epoch")
    ).select_related("holder"):
        out[lease.work_item_id].last_lease = lease


def _with_pending_takeovers(out: dict[int, BlockedItem], ids: list[int]) -> None:
    """A takeover request already waiting for an item, and who asked (one query)."""
    if not apps.is_installed("leaseboard.takeovers") or not ids:
        return
    requests = apps.get_model("takeovers", "TakeoverRequest")
    for req in requests.objects.filter(work_item_id__in=ids, status="pending").select_related(
        "requested_by"
    ):
        blocked = out[req.work_item_id]
        blocked.pending_takeover_id = req.id
        blocked.pending_takeover_by = req.requested_by.get_username()
