"""The approver's queues: pending takeover requests and effects awaiting approval."""

from __future__ import annotations

from leaseboard.core.models import Effect
from leaseboard.takeovers.models import TakeoverRequest


def pending_requests(limit: int = 200) -> list[TakeoverRequest]:
    return list(
        TakeoverRequest.objects.filter(status=TakeoverRequest.Status.PENDING)
        .select_related("work_item", "requested_by", "grantee", "target_holder")
        .order_by("decide_by_ms", "id")[:limit]
    )


def pending_effects(limit: int = 200) -> list[Effect]:
    return list(
        Effect.objects.filter(decision=Effect.Decision.PENDING_APPROVAL)
        .select_related("work_item", "executor", "lease")
        .order_by("proposed_at_ms")[:limit]
    )
