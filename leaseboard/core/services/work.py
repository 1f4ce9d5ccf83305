"""Work admission and completion."""

from __future__ import annotations

import re
from typing import Any

from django.db import IntegrityError, transaction

from leaseboard.core.authority import Actor, authorize
from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Executor, Lease, Queue, WorkItem
from leaseboard.core.services.envelopes import envelope_admit_check
from leaseboard.core.services.jsondocs import json_size_checked
from leaseboard.core.services.leases import (
    executor_id_of,
    held_lease_locked,
    lease_end_locked,
    timing_for,
    unreconciled_effects_exist,
)
from leaseboard.core.tracing import Decision, decided
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import (
    IdempotencyConflict,
    NeedsReconciliation,
    NotFound,
    ValidationFailed,
)
from leaseboard.domain.timing import TimingPolicyError

# The one key alphabet: a letter or digit, then letters, digits and . _ : @ - (at most 200).
# Every such key is one URL path segment as it stands, so every key is reachable through
# /api/v1/work-items/{key}. No `/`: a key with one could never be addressed (keys admitted
# with one before this rule stay readable in the dashboard).
KEY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$"
KEY_RE = re.compile(KEY_PATTERN)
KEY_RULE = "1-200 characters: a letter or digit, then letters, digits and . _ : @ -"


def _timing_checked(item: WorkItem) -> None:
    """Refuse unsafe or out-of-bounds timing now, not at the first grant: an item may
    tighten its queue's policy but not outlive the queue's lifetime cap."""
    queue_policy = timing_for(WorkItem(queue=item.queue))
    try:
        queue_policy.narrowed(item.timing)
    except TimingPolicyError as exc:
        raise ValidationFailed(f"policy: {exc}", param=f"policy.{exc.param}") from None


def _open_count(queue: Queue) -> int:
    return WorkItem.objects.filter(
        queue=queue, admission=WorkItem.Admission.ADMITTED, status=WorkItem.Status.OPEN
    ).count()


def _in_another_queue(item: WorkItem, queue_name: str) -> IdempotencyConflict:
    """A retried admit is answered with the item's state; the same key for another queue
    is not a retry but a conflict, answered with the queue the item is in."""
    return IdempotencyConflict(
        f"work item {item.key!r} was admitted to queue {item.queue.name!r}, not "
        f"{queue_name!r}; a key names one work item in one queue",
        queue=item.queue.name,
        param="queue",
    )


def _admitted(span: Decision, answer: tuple[WorkItem, bool]) -> None:
    item, created = answer
    span.note(
        decision=item.admission,
        code="capacity_exhausted" if item.admission == "rejected" else None,
        epoch=item.epoch,
        created=created,
    )


@decided(
    "leaseboard.work.admit",
    about=lambda kw: {"work_key": kw["key"], "queue": kw.get("queue_name", "default")},
    result=_admitted,
)
@transaction.atomic(durable=True)
def work_admit(
    *,
    key: str,
    queue_name: str = "default",
    title: str = "",
    scope: dict[str, Any] | None = None,
    timing: dict[str, Any] | None = None,
    by: Executor | None,
) -> tuple[WorkItem, bool]:
    """Admit (or queue, or reject) a work item. Returns (item, created); an existing key
    answers with its current state so a retried admit is harmless. `by`: the agent
    admitting it, which may do so only into a queue its credential may use (None: a
    service admitting on no agent's behalf)."""
    if not KEY_RE.fullmatch(key or ""):
        raise ValidationFailed(f"key must be {KEY_RULE}", param="key")
    json_size_checked(scope or {}, param="scope", limit=64 * 1024)
    if by is not None:
        # Before the queue is looked up: a credential learns nothing of queues it may not use.
        authorize(Act.ADMIT, Actor.of_executor(by), queue=queue_name)
    queue = Queue.objects.select_for_update(no_key=True).filter(name=queue_name).first()
    if queue is None:
        raise NotFound(f"no queue {queue_name!r}")
    existing = WorkItem.objects.select_related("queue").filter(key=key).first()
    if existing is not None:
        if existing.queue_id != queue.id:
            raise _in_another_queue(existing, queue_name)
        return existing, False
    envelope_admit_check(queue, scope or {})  # the scopes the queue admits
    item = WorkItem(
        key=key,
        queue=queue,
        title=title[:300],
        scope=scope or {},
        timing=timing or {},
        admitted_by=by,
    )
    _timing_checked(item)
    now = db_now_ms()
    item.created_at_ms = now
    # The queue row lock serializes admissions, so the capacity count cannot be raced.
    if queue.capacity is None or _open_count(queue) < queue.capacity:
        item.admission = WorkItem.Admission.ADMITTED
        item.admitted_at_ms = now
    elif queue.overflow == Queue.Overflow.WAIT:
        item.admission = WorkItem.Admission.WAITING
    else:
        item.admission = WorkItem.Admission.REJECTED
    try:
        with transaction.atomic():
            item.save()
    except IntegrityError:
        # An admit of the same key committed while we held this queue's lock: the other
        # queue's lock (if it was another queue) did not stop it.
        winner = WorkItem.objects.select_related("queue").get(key=key)
        if winner.queue_id != queue.id:
            raise _in_another_queue(winner, queue_name) from None
        return winner, False
    return item, True


def work_admit_waiting_locked(queue: Queue, now_ms: int) -> WorkItem | None:
    """Admit the oldest waiting item of a queue if capacity allows (queue row locked)."""
    if queue.capacity is not None and _open_count(queue) >= queue.capacity:
        return None
    nxt = (
        WorkItem.objects.select_for_update(skip_locked=True)
        .filter(queue=queue, admission=WorkItem.Admission.WAITING)
        .order_by("created_at_ms", "id")
        .first()
    )
    if nxt is None:
        return None
    nxt.admission = WorkItem.Admission.ADMITTED
    nxt.admitted_at_ms = now_ms
    nxt.save(update_fields=["admission", "admitted_at_ms"])
    return nxt


def work_complete_locked(
    *, item: WorkItem, lease: Lease, actor: Actor, epoch: int, now_ms: int, reason: str
) -> WorkItem:
    """Complete the work under a lease the caller has locked with its work item (human
    standing takes this path); the authority decides, then the reconciliation gate."""
    authorize(
        Act.COMPLETE, actor, now_ms=now_ms, lease=lease, epoch=epoch, current_epoch=item.epoch
    )
    return _complete(
        item=item, lease=lease, actor_id=executor_id_of(actor), now_ms=now_ms, reason=reason
    )


def _complete(*, item: WorkItem, lease: Lease, actor_id: int, now_ms: int, reason: str) -> WorkItem:
    if unreconciled_effects_exist(item):
        raise NeedsReconciliation(
            "effects without a known outcome must be reported or reconciled before completion"
        )
    lease_end_locked(
        lease=lease, state=Lease.State.RELEASED, now_ms=now_ms, reason=reason, actor_id=actor_id
    )
    item.status = WorkItem.Status.COMPLETED
    item.completed_at_ms = now_ms
    item.save(update_fields=["status", "completed_at_ms"])
    queue = type(item.queue).objects.select_for_update(no_key=True).get(id=item.queue_id)
    work_admit_waiting_locked(queue, now_ms)
    return item


@transaction.atomic(durable=True)
def work_complete(
    *, lease_id: Any, executor: Executor, epoch: int, work_key: str | None = None
) -> WorkItem:
    """Complete the work under a live, active lease; refused while effects are unreconciled.
    A holder in jeopardy may not claim completion (quiescence)."""
    lease, now = held_lease_locked(
        act=Act.COMPLETE, lease_id=lease_id, executor=executor, epoch=epoch
    )
    if work_key is not None and lease.work_item.key != work_key:
        raise ValidationFailed(f"lease {lease.id} is not a lease on {work_key!r}", param="key")
    return _complete(
        item=lease.work_item, lease=lease, actor_id=executor.id, now_ms=now, reason="completed"
    )
