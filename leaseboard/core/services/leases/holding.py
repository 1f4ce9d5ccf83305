"""Acts under a held lease that are neither renewal nor an end: checkpoints, and the
extension of a human's standing within its lifetime cap."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from leaseboard.core.authority import Actor, authorize
from leaseboard.core.clock import db_now_ms
from leaseboard.core.locking import lease_locked
from leaseboard.core.models import Checkpoint, Executor, Lease, LeaseEvent
from leaseboard.core.services.jsondocs import json_size_checked
from leaseboard.core.services.leases.base import (
    executor_id_of,
    lease_event_record,
    parse_lease_id,
)
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import (
    ValidationFailed,
)


def held_lease_locked(
    *,
    act: Act,
    lease_id: Any,
    executor: Executor,
    epoch: int,
    related: tuple[str, ...] = ("work_item", "work_item__queue", "holder"),
) -> tuple[Lease, int]:
    """Lock a lease the caller claims to hold at `epoch`, ask the authority whether `act`
    may happen under it now, and return it with the database clock read after the lock.
    `related`: what the lock's statement reads along (the agents' release and renew, hot
    paths, leave the queue out: they never read it)."""
    lid = parse_lease_id(lease_id)
    lease = lease_locked(lid, related=related)
    now_ms = db_now_ms()
    authorize(
        act,
        Actor.of_executor(executor),
        now_ms=now_ms,
        lease=lease,
        epoch=epoch,
        current_epoch=lease.work_item.epoch,
    )
    return lease, now_ms


@transaction.atomic(durable=True)
def lease_checkpoint(*, lease_id: Any, executor: Executor, epoch: int, data: Any) -> Checkpoint:
    if data is None:
        raise ValidationFailed("data is a JSON document, not null", param="data")
    size = json_size_checked(data, param="data", limit=settings.LEASEBOARD_MAX_CHECKPOINT_BYTES)
    lease, now = held_lease_locked(
        act=Act.CHECKPOINT, lease_id=lease_id, executor=executor, epoch=epoch
    )
    return checkpoint_save_locked(lease=lease, data=data, size=size, now_ms=now)


def checkpoint_save_locked(*, lease: Lease, data: Any, size: int, now_ms: int) -> Checkpoint:
    """The next checkpoint of the lease's work item, under the lease's epoch: the caller
    holds the lease's lock and has had CHECKPOINT authorized (an agent above, a person under
    standing in takeovers.services.standing)."""
    last = Checkpoint.objects.filter(work_item_id=lease.work_item_id).order_by("-seq").first()
    return Checkpoint.objects.create(
        work_item_id=lease.work_item_id,
        lease=lease,
        epoch=lease.epoch,
        seq=(last.seq + 1) if last else 1,
        data=data,
        size_bytes=size,
        at_ms=now_ms,
    )


def lease_extend_locked(
    *,
    lease: Lease,
    actor: Actor,
    epoch: int,
    current_epoch: int,
    now_ms: int,
    extend_ms: int,
    reason: str,
) -> Lease:
    """Human standing: a new absolute expiry `now + extend_ms`, within the lease's lifetime
    cap. Same epoch; recorded as an EXTENDED event."""
    authorize(
        Act.EXTEND_STANDING,
        actor,
        now_ms=now_ms,
        lease=lease,
        epoch=epoch,
        current_epoch=current_epoch,
    )
    new_expiry = min(now_ms + extend_ms, lease.max_expires_at_ms)
    if new_expiry <= lease.expires_at_ms:
        raise ValidationFailed(
            "the standing is already at its maximum; hand back, assign or complete",
            param="extend_ms",
        )
    # Compare-and-set on the epoch, under the row lock the caller holds.
    Lease.objects.filter(id=lease.id, epoch=lease.epoch).update(
        expires_at_ms=new_expiry, jeopardy_at_ms=new_expiry, due_at_ms=new_expiry
    )
    lease.expires_at_ms = lease.jeopardy_at_ms = lease.due_at_ms = new_expiry
    lease_event_record(
        lease,
        LeaseEvent.Kind.EXTENDED,
        at_ms=now_ms,
        actor_id=executor_id_of(actor),
        detail={"reason": reason[:300], "expires_at_ms": new_expiry},
    )
    return lease
