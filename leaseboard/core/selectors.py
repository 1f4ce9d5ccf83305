"""Reads with a fixed query count. Nothing here writes."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Exists, OuterRef, QuerySet, Value
from django.db.models.functions import Coalesce

from leaseboard.core.clock import DbNowMs, db_now_ms
from leaseboard.core.models import Alert, AlertSnooze, Effect, Lease, WorkItem
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


def alert_group_key(alert_holder_id: int | None, kind: str) -> str:
    """How a group of alerts (one agent, one kind) is named in forms: "<agent id>:<kind>",
    agent id 0 for alerts about no agent's lease."""
    return f"{alert_holder_id or 0}:{kind}"


def alerts_unsnoozed(qs: QuerySet[Alert], *, snoozed: bool = False) -> QuerySet[Alert]:
    """Alerts whose group (their lease holder and kind) is not snoozed now, or with
    `snoozed`, only those whose group is. Read with the database clock, in the same query."""
    active = AlertSnooze.objects.annotate(agent=Coalesce("executor_id", Value(0))).filter(
        kind=OuterRef("kind"),
        agent=Coalesce(OuterRef("lease__holder_id"), Value(0)),
        until_ms__gt=DbNowMs(),
    )
    return qs.filter(Exists(active)) if snoozed else qs.exclude(Exists(active))


def effects_awaiting_approval() -> QuerySet[Effect]:
    """Effects waiting for an approver under a lease that is still live (the approver's
    badge, leaseboard/core/badges.py)."""
    return Effect.objects.filter(
        decision=Effect.Decision.PENDING_APPROVAL,
        lease__state__in=LIVE_STATES,
        lease__expires_at_ms__gt=DbNowMs(),
    )
