"""The executor page: an agent's or a human's live and recent leases, renewal health and
refused effects."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Effect, Executor, Lease, Quarantine
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.dashboard.selectors.rows import LeaseRow, lease_row

EXECUTOR_LEASE_LIMIT = 50
EXECUTOR_REFUSAL_LIMIT = 50
QUARANTINE_LIMIT = 10


@dataclass
class ExecutorPage:
    executor: Executor
    now_ms: int
    live: list[LeaseRow]
    recent: list[LeaseRow]
    refusals: list[Effect]
    health: dict[str, Any]
    quarantines: list[Quarantine]  # newest first

    @property
    def quarantine(self) -> Quarantine | None:
        """The quarantine in force, if any."""
        first = self.quarantines[0] if self.quarantines else None
        return first if first is not None and first.is_open else None


def executor_page(*, executor_id: int) -> ExecutorPage | None:
    """An executor's live and recent leases, renewal health, refusals and quarantines;
    6 queries."""
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
    quarantines = list(
        Quarantine.objects.filter(executor=executor)
        .select_related("started_by", "lifted_by")
        .order_by("-started_at_ms", "-id")[:QUARANTINE_LIMIT]
    )
    live_rows = [lease_row(x, now_ms) for x in live]
    recent_rows = [lease_row(x, now_ms) for x in recent]
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
    return ExecutorPage(executor, now_ms, live_rows, recent_rows, refusals, health, quarantines)
