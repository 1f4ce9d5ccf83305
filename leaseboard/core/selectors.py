"""Reads with a fixed query count. Nothing here writes."""

from __future__ import annotations

from dataclasses import dataclass

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Lease, WorkItem
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.domain.certainty import Certainty, LeaseTimes, state_at
from leaseboard.domain.errors import NotFound


@dataclass(frozen=True)
class WorkItemState:
    item: WorkItem
    lease: Lease | None
    certainty: str | None
    expires_in_ms: int | None


def lease_certainty(lease: Lease, now_ms: int) -> Certainty:
    return state_at(
        LeaseTimes(Certainty(lease.state), lease.jeopardy_at_ms, lease.expires_at_ms), now_ms
    )


def work_item_state(*, key: str) -> WorkItemState:
    item = WorkItem.objects.select_related("queue").filter(key=key).first()
    if item is None:
        raise NotFound(f"no work item {key!r}")
    now = db_now_ms()
    lease = (
        Lease.objects.select_related("holder").filter(work_item=item, state__in=LIVE_STATES).first()
    )
    if lease is None:
        return WorkItemState(item, None, None, None)
    certainty = lease_certainty(lease, now)
    if certainty not in (Certainty.ACTIVE, Certainty.JEOPARDY):
        # Time already ended it; a sweep will write that down. No holder has standing.
        return WorkItemState(item, None, None, None)
    return WorkItemState(item, lease, certainty.value, max(0, lease.expires_at_ms - now))
