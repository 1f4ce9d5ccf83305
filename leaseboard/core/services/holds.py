"""An operator's hold on a work item: stop new effects without taking the lease away.

The hold belongs to the work item (docs/design.md §9, "no route around a rule"): it is put on
through the item's live lease, and while it is on, the holder keeps renewing,
checkpointing and reporting outcomes; new effects and approvals of waiting ones are
refused `on_hold` (the authority table's "on hold" column), and so is every acquire, so
the agent it stops cannot escape it by releasing and acquiring again. It ends only by an
operator's decision: released here, or lifted by an approved takeover (a person then holds
the work). The live lease carries a copy of the hold (its renew answer tells the holder,
whose SDK quiesces locally); a grant copies the item's hold onto the new lease.
Modelled on the operator revoke (leases.lease_revoke_audited_locked): the work item's
lock, then the lease's, the authority's verdict, the write and its audit entry in one
transaction.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from leaseboard.core.authority import Actor, authorize, authorize_who
from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Lease, WorkItem
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.core.services.audit import audit_act, audit_record
from leaseboard.core.services.bulk import (
    BulkResult,
    ItemOutcome,
    bulk_audited,
    each_item,
    ids_checked,
)
from leaseboard.core.services.leases import (
    lease_for_revoke_locked,
    leases_in_work_item_order,
    revoke_reason,
)
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import ValidationFailed
from leaseboard.domain.vocabulary import reason_checked

NOTE_MAX = 1000
HOLD_FIELDS = ["held_at_ms", "hold_reason", "held_by"]


def _live_copies(item: WorkItem) -> Any:
    return Lease.objects.filter(work_item=item, state__in=LIVE_STATES)


def _hold_set_locked(item: WorkItem, *, at_ms: int | None, reason: str, by: int | None) -> None:
    """The item's hold, and the copy its live lease carries (the caller holds both locks)."""
    item.held_at_ms, item.hold_reason, item.held_by_id = at_ms, reason, by
    item.save(update_fields=HOLD_FIELDS)
    _live_copies(item).update(held_at_ms=at_ms, hold_reason=reason, held_by_id=by)


@transaction.atomic(durable=True)
def lease_hold(
    *,
    lease_id: Any,
    actor: Actor,
    reason_category: str,
    reason_text: str,
    request_id: str = "",
) -> Lease:
    """Put a work item on hold through its live lease, with a structured reason (a hold
    already on is refused: one hold, one reason)."""
    text = reason_checked(reason_category, reason_text, what="a hold")
    item, lease = lease_for_revoke_locked(lease_id)
    # deliberate: keyword arguments named one a line; alike in shape only, the values differ.
    return lease_hold_locked(
        item=item,
        lease=lease,
        actor=actor,
        now_ms=db_now_ms(),
        reason_category=reason_category,
        reason_text=text,
        request_id=request_id,
    )


def lease_hold_locked(
    *,
    item: WorkItem,
    lease: Lease,
    actor: Actor,
    now_ms: int,
    reason_category: str,
    reason_text: str,
    request_id: str = "",
) -> Lease:
    """The hold inside a caller's transaction, which holds the work item's lock, then the
    lease's (a takeover request that holds the agent while it waits); `reason_text` is
    already checked."""
    authorize(Act.HOLD, actor, now_ms=now_ms, lease=lease)
    if item.held_at_ms is not None:
        raise ValidationFailed(f"the work item is already on hold: {item.hold_reason}")
    reason = revoke_reason(reason_category, reason_text)
    _hold_set_locked(item, at_ms=now_ms, reason=reason, by=actor.user_id)
    lease.refresh_from_db(fields=HOLD_FIELDS)
    # deliberate: audit_act's keywords one a line; each act records its own before and after.
    audit_act(
        act=Act.HOLD,
        actor=actor,
        action="lease.hold",
        object_type="lease",
        object_id=str(lease.id),
        work_item=item,
        at_ms=now_ms,
        reason=item.hold_reason,
        before={"held": False, "epoch": lease.epoch, "holder": lease.holder.name},
        after={"held": True, "reason_category": reason_category, "reason_text": reason_text},
        request_id=request_id,
    )
    return lease


@transaction.atomic(durable=True)
def lease_hold_release(
    *, lease_id: Any, actor: Actor, note: str = "", request_id: str = ""
) -> Lease:
    """Lift the work item's hold (named by any of its leases, live or ended): the holder
    may propose effects again, and the item may be acquired, from the commit on."""
    item, lease = lease_for_revoke_locked(lease_id)
    now = db_now_ms()
    authorize(Act.RELEASE_HOLD, actor, now_ms=now, lease=lease, held=item.held_at_ms is not None)
    if item.held_at_ms is None:
        raise ValidationFailed("the work item is not on hold")
    before = _hold_view(item)
    held_at_ms = item.held_at_ms
    _hold_set_locked(item, at_ms=None, reason="", by=None)
    lease.refresh_from_db(fields=HOLD_FIELDS)
    # deliberate: audit_act's keywords one a line; each act records its own before and after.
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


def work_hold_lift_locked(
    *,
    item: WorkItem,
    act: Act,
    actor: Actor | None,
    now_ms: int,
    why: str,
    request_id: str = "",
) -> str:
    """End the item's hold as part of a decision about the work (an approved takeover, a
    break-glass; a rejected or expired request lifting the hold it placed), inside the
    caller's transaction, which holds the work item's lock and has authorized `act`. No
    actor: the sweep (an expired request). Returns the lifted hold's reason ("" when the
    item was not held: nothing is written)."""
    if item.held_at_ms is None:
        return ""
    before = _hold_view(item)
    _hold_set_locked(item, at_ms=None, reason="", by=None)
    said: dict[str, Any] = {
        "object_type": "work_item",
        "object_id": item.key,
        "work_item": item,
        "at_ms": now_ms,
        "reason": why[:NOTE_MAX],
        "before": before,
        "after": {"held": False, "held_for_ms": now_ms - int(before["held_at_ms"])},
        "request_id": request_id,
    }
    if actor is None:
        audit_record(
            actor_name="sweep", actor_role="system", action="work_item.hold_lifted", **said
        )
    else:
        audit_act(act=act, actor=actor, action="work_item.hold_lifted", **said)
    return str(before["reason"])


def _hold_view(item: WorkItem) -> dict[str, Any]:
    return {"held": True, "reason": item.hold_reason, "held_at_ms": item.held_at_ms}


# -- hold by query ----------------------------------------------------------------------------


@transaction.atomic(durable=True)
def leases_hold_bulk(
    *,
    lease_ids: list[Any],
    actor: Actor,
    reason_category: str,
    reason_text: str,
    query: dict[str, str] | None = None,
    request_id: str = "",
) -> BulkResult:
    """Hold several agents' leases with one structured reason ("hold all N matching this
    filter"), each by the one hold (lease_hold_locked) in a savepoint: one refused lease
    (ended, already held, outside the actor's queues) undoes only its own writes. The bulk
    and every outcome are audited in the same transaction."""
    authorize_who(Act.HOLD, actor)  # each lease is then decided in its queue
    text = reason_checked(reason_category, reason_text, what="a hold")
    ids = ids_checked(lease_ids, what="lease", param="lease_ids")
    known, order = leases_in_work_item_order(ids)

    def named(raw: str) -> ItemOutcome:
        lease = known.get(raw)
        return (
            ItemOutcome(raw, False, lease.work_item.key, lease.holder.name)
            if lease
            else (ItemOutcome(raw, False))
        )

    def one(raw: str) -> ItemOutcome:
        with transaction.atomic():
            item, lease = lease_for_revoke_locked(raw)
            lease_hold_locked(
                item=item,
                lease=lease,
                actor=actor,
                now_ms=db_now_ms(),
                reason_category=reason_category,
                reason_text=text,
                request_id=request_id,
            )
        return ItemOutcome(raw, True, item.key, lease.holder.name)

    done = {o.id: o for o in each_item(order, one, named=named)}
    return bulk_audited(
        act=Act.HOLD,
        actor=actor,
        action="lease.hold_bulk",
        outcomes=[done[raw] for raw in ids],
        reason=revoke_reason(reason_category, text),
        query=query,
        request_id=request_id,
    )
