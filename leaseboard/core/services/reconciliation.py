"""Reconciliation: a human or the successor says what became of an effect whose outcome
nobody reported (confirmed, not applied, compensated), with a note (docs/design.md §6).

Who may: the agent holding the work item's live lease at a later epoch, or an operator
under their own live standing on that item — and nobody while the effect's own lease is
still live (its holder reports that outcome). The authority table decides.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from leaseboard.core.authority import Actor, authorize
from leaseboard.core.clock import db_now_ms
from leaseboard.core.locking import work_item_locked
from leaseboard.core.models import Effect, Lease, WorkItem
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.core.services.alerts import reconciliation_alerts_resolve_if_done
from leaseboard.core.services.audit import audit_act
from leaseboard.core.services.effects import parse_effect_id
from leaseboard.core.services.leases import parse_lease_id
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import ValidationFailed


@transaction.atomic(durable=True)
def effect_reconcile(
    *,
    effect_id: Any,
    actor: Actor,
    resolution: str,
    note: str,
    lease_id: Any = None,
    epoch: int | None = None,
    request_id: str = "",
) -> Effect:
    """Mark an unreconciled effect confirmed, not applied or compensated, with a note.
    An agent presents its own lease and epoch as the successor; a human's standing is
    read from the work item's live lease."""
    note = _reconcile_input_check(resolution=resolution, note=note)
    item, effect, successor = _reconcile_locked(parse_effect_id(effect_id))
    if lease_id is not None and (successor is None or parse_lease_id(lease_id) != successor.id):
        epoch = None  # the lease presented is not the live one: no standing through it
    now = db_now_ms()
    authorize(
        Act.RECONCILE,
        actor,
        now_ms=now,
        lease=effect.lease,
        epoch=epoch,
        current_epoch=item.epoch,
        effect=effect,
        successor=successor,
    )
    if not effect.needs_reconciliation:
        raise ValidationFailed("this effect does not need reconciliation")
    _reconcile_write(
        item=item,
        effect=effect,
        successor=successor,
        actor=actor,
        resolution=resolution,
        note=note,
        now_ms=now,
        request_id=request_id,
    )
    reconciliation_alerts_resolve_if_done(work_item_id=item.id, now_ms=now)
    return effect


def _reconcile_input_check(*, resolution: str, note: str) -> str:
    """The resolution is one of the three and the note is not blank; returns the note
    stripped. Checked before any lock is taken."""
    if resolution not in Effect.Resolution.values:
        raise ValidationFailed(
            "resolution is confirmed, not_applied or compensated", param="resolution"
        )
    note = (note or "").strip()
    if not note:
        raise ValidationFailed("a reconciliation needs a note", param="note")
    return note


def _reconcile_locked(eid: uuid.UUID) -> tuple[WorkItem, Effect, Lease | None]:
    """Lock in the house order: the work item, then the effect, then the item's live lease
    (the successor, if any)."""
    item = work_item_locked(Effect, eid, what="effect")
    effect = (
        Effect.objects.select_for_update(no_key=True, of=("self",))
        .select_related("lease")
        .get(id=eid)
    )
    successor = (
        Lease.objects.select_for_update(no_key=True, of=("self",))
        .filter(work_item=item, state__in=LIVE_STATES)
        .first()
    )
    return item, effect, successor


def _reconcile_write(
    *,
    item: WorkItem,
    effect: Effect,
    successor: Lease | None,
    actor: Actor,
    resolution: str,
    note: str,
    now_ms: int,
    request_id: str,
) -> None:
    """The resolution on the effect row and its audit entry, in the caller's transaction."""
    before = {"outcome": effect.outcome, "resolution": ""}
    effect.resolution = resolution
    effect.resolution_note = note[:1000]
    effect.resolved_at_ms = now_ms
    effect.resolved_by_id = successor.holder_id if successor is not None else None
    effect.save(update_fields=["resolution", "resolution_note", "resolved_at_ms", "resolved_by"])
    # deliberate: audit_act's keywords one a line; each act records its own before and after.
    audit_act(
        act=Act.RECONCILE,
        actor=actor,
        action="effect.reconcile",
        object_type="effect",
        object_id=str(effect.id),
        work_item=item,
        at_ms=now_ms,
        reason=note,
        before=before,
        after={"resolution": resolution},
        request_id=request_id,
    )
