"""An operator's hold on a lease: stop new effects without taking the lease away.

While held, the holder keeps renewing, checkpointing and reporting outcomes; new effects
and approvals of waiting ones are refused `on_hold` (the authority table's "on hold"
column); the renew answer carries the hold, so the holder's SDK quiesces locally. The hold
is released by an operator, or ends with the lease (an approved takeover revokes it).
Modelled on the operator revoke (leases.lease_revoke_audited_locked): the work item's
lock, then the lease's, the authority's verdict, the write and its audit entry in one
transaction.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from leaseboard.core.authority import Actor, authorize
from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Lease
from leaseboard.core.services.audit import audit_act
from leaseboard.core.services.leases import lease_for_revoke_locked, revoke_reason
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import ValidationFailed
from leaseboard.domain.vocabulary import reason_checked

NOTE_MAX = 1000


@transaction.atomic(durable=True)
def lease_hold(
    *,
    lease_id: Any,
    actor: Actor,
    reason_category: str,
    reason_text: str,
    request_id: str = "",
) -> Lease:
    """Put a live lease on hold with a structured reason (a hold already on is refused:
    one hold, one reason)."""
    text = reason_checked(reason_category, reason_text, what="a hold")
    category = reason_category
    item, lease = lease_for_revoke_locked(lease_id)
    now = db_now_ms()
    authorize(Act.HOLD, actor, now_ms=now, lease=lease)
    if lease.held_at_ms is not None:
        raise ValidationFailed(f"the lease is already on hold: {lease.hold_reason}")
    lease.held_at_ms, lease.hold_reason = now, revoke_reason(category, text)
    lease.held_by_id = actor.user_id
    lease.save(update_fields=["held_at_ms", "hold_reason", "held_by"])
    audit_act(
        act=Act.HOLD,
        actor=actor,
        action="lease.hold",
        object_type="lease",
        object_id=str(lease.id),
        work_item=item,
        at_ms=now,
        reason=lease.hold_reason,
        before={"held": False, "epoch": lease.epoch, "holder": lease.holder.name},
        after={"held": True, "reason_category": category, "reason_text": text},
        request_id=request_id,
    )
    return lease


@transaction.atomic(durable=True)
def lease_hold_release(
    *, lease_id: Any, actor: Actor, note: str = "", request_id: str = ""
) -> Lease:
    """Lift the hold: the holder may propose effects again from the commit on."""
    item, lease = lease_for_revoke_locked(lease_id)
    now = db_now_ms()
    authorize(Act.RELEASE_HOLD, actor, now_ms=now, lease=lease)
    if lease.held_at_ms is None:
        raise ValidationFailed("the lease is not on hold")
    held_at_ms = lease.held_at_ms
    before = {"held": True, "reason": lease.hold_reason, "held_at_ms": held_at_ms}
    lease.held_at_ms, lease.hold_reason, lease.held_by_id = None, "", None
    lease.save(update_fields=["held_at_ms", "hold_reason", "held_by"])
    audit_act(
        act=Act.RELEASE_HOLD,
        actor=actor,
        action="lease.hold_release",
        object_type="lease",
        object_id=str(lease.id),
        work_item=item,
        at_ms=now,
        reason=(note or "").strip()[:NOTE_MAX],
        before=before,
        after={"held": False, "held_for_ms": now - held_at_ms},
        request_id=request_id,
    )
    return lease
