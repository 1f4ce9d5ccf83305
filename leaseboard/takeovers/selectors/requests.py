"""What an operator sees before asking to take a work item over: who holds it, in what
certainty, for how long still, and its recent effects and those with no known outcome.
4 queries; nothing here writes."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Effect, Lease, WorkItem
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.domain.certainty import Certainty, LeaseTimes, state_at
from leaseboard.takeovers.models import TakeoverRequest

RECENT_EFFECTS = 5


@dataclass
class RequestContext:
    item: WorkItem
    lease: Lease | None  # the live lease, if any
    certainty: str | None
    expires_in_ms: int
    last_holder: str  # the latest holder, live or not
    recent_effects: list[Effect]
    open_effects: list[Effect]  # authorized, outcome unknown or not reported
    pending: TakeoverRequest | None = None  # a request already waiting for an approver
    pending_in_ms: int = 0  # until it is decided or expires


def request_context(*, key: str) -> RequestContext | None:
    item = WorkItem.objects.select_related("queue").filter(key=key).first()
    if item is None:
        return None
    now = db_now_ms()
    latest = list(
        Lease.objects.select_related("holder")
        .defer("recent_renewals")
        .filter(work_item=item)
        .order_by("-epoch")[:1]
    )
    lease = latest[0] if latest and latest[0].state in LIVE_STATES else None
    certainty = None
    if lease is not None:
        times = LeaseTimes(Certainty(lease.state), lease.jeopardy_at_ms, lease.expires_at_ms)
        certainty = state_at(times, now).value
    effects = list(
        Effect.objects.filter(work_item=item)
        .select_related("executor")
        .defer("fencing_token")
        .order_by("-proposed_at_ms")[:50]
    )
    open_effects = [
        e
        for e in effects
        if e.decision == Effect.Decision.AUTHORIZED
        and e.resolution == ""
        and e.outcome in ("", Effect.Outcome.UNKNOWN)
    ]
    pending = pending_request(item.id)
    return RequestContext(
        item=item,
        lease=lease,
        certainty=certainty,
        expires_in_ms=max(0, lease.expires_at_ms - now) if lease else 0,
        last_holder=latest[0].holder.name if latest else "",
        recent_effects=effects[:RECENT_EFFECTS],
        open_effects=open_effects,
        pending=pending,
        pending_in_ms=max(0, pending.decide_by_ms - now) if pending else 0,
    )


def pending_request(work_item_id: int) -> TakeoverRequest | None:
    """The takeover request waiting for an approver on this work item (at most one: a
    partial unique index), with who asked and who would get standing."""
    return (
        TakeoverRequest.objects.filter(
            work_item_id=work_item_id, status=TakeoverRequest.Status.PENDING
        )
        .select_related("requested_by", "grantee")
        .first()
    )


def takeover_requests_pending() -> QuerySet[TakeoverRequest]:
    """Takeover requests waiting for an approver's decision (the approver's badge)."""
    return TakeoverRequest.objects.filter(status=TakeoverRequest.Status.PENDING)
