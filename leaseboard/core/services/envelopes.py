"""A queue's admission envelope, checked where work is admitted and where leases are
granted (leaseboard.domain.envelopes holds the rules). Each refusal names the limit that
refused: `limit` is capacity, scope, leases_per_agent or window. Nothing here writes."""

from __future__ import annotations

from typing import Any

from leaseboard.core.models import Executor, Lease, Queue, WorkItem
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.domain.envelopes import scope_refusal, window_wait_ms, windows_checked
from leaseboard.domain.errors import CapacityExhausted, WorkNotAdmitted


def envelope_admit_check(queue: Queue, scope: dict[str, Any]) -> None:
    """At admission: the scopes the queue admits."""
    if queue.admits_scopes:
        why = scope_refusal(queue.admits_scopes, scope)
        if why:
            raise WorkNotAdmitted(why, limit="scope", queue=queue.name)


def envelope_grant_check_locked(*, item: WorkItem, executor: Executor, now_ms: int) -> None:
    """At an agent's acquire (the work item locked; its queue loaded with it): the queue's
    time windows, then the live leases one agent may hold in it. Costs nothing for a queue
    without either; with a per-agent limit it locks the agent's row, so two acquires by
    one agent cannot both take the last place."""
    queue = item.queue
    if queue.windows:
        wait = window_wait_ms(windows_checked(queue.windows), now_ms)
        if wait:
            raise WorkNotAdmitted(
                f"queue {queue.name!r} grants leases only inside its time windows",
                limit="window",
                retry_after_ms=wait,
            )
    limit = queue.leases_per_agent
    if limit and executor.kind == Executor.Kind.AGENT:
        Executor.objects.select_for_update(no_key=True).filter(id=executor.id).values("id").get()
        held = (
            Lease.objects.filter(
                holder_id=executor.id,
                state__in=LIVE_STATES,
                expires_at_ms__gt=now_ms,
                work_item__queue_id=queue.id,
            )
            .values("id")[:limit]
            .count()
        )
        if held >= limit:
            raise CapacityExhausted(
                f"{executor.name} already holds {held} live lease(s) in queue {queue.name!r}, "
                f"its limit per agent",
                limit="leases_per_agent",
                leases_per_agent=limit,
            )
