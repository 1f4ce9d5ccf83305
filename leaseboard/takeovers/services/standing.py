"""Acting under human standing: extend it, complete the work, hand it back to the agent
pool, assign it to a named agent, record an effect performed by hand, reconcile.

Every act is the core's (the authority decides; core services write the lease, event and
effect rows); this module keeps the intervention's outcome and timeline and the audit.
Hand-back and assign are compare-and-sets on (lease id, epoch): a retry of an end that
already happened answers as before and changes nothing.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from leaseboard.core.authority import Actor, refusal, verdict
from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Effect, Lease, WorkItem
from leaseboard.core.services.effects import effect_record_locked
from leaseboard.core.services.leases import (
    lease_assign_locked,
    lease_extend_locked,
    lease_hand_back_locked,
    unreconciled_effects_exist,
)
from leaseboard.core.services.work import work_complete_locked
from leaseboard.domain.authority import IDENTITY_CODES, Act
from leaseboard.domain.errors import NeedsReconciliation, ValidationFailed
from leaseboard.takeovers.models import Intervention
from leaseboard.takeovers.services._common import (
    agent_named,
    audited,
    lease_view,
    locked,
    standing_lease_locked,
    standing_min_ms,
    timeline,
)


def _under_standing(
    intervention_pk: int, lease_id: Any, epoch: int
) -> tuple[Intervention, WorkItem, Lease, int]:
    """Lock work item, intervention and its lease; read the clock after the locks."""
    iv, item = locked(Intervention, intervention_pk, what="intervention", related=("grantee",))
    lease = standing_lease_locked(iv=iv, item=item, lease_id=lease_id, epoch=epoch)
    return iv, item, lease, db_now_ms()


def _retried(
    act: Act,
    *,
    iv: Intervention,
    item: WorkItem,
    lease: Lease,
    actor: Actor,
    epoch: int,
    now: int,
    outcome: str,
) -> bool:
    """A retry, by the person who holds the standing, of the end that already happened to
    exactly this (lease, epoch): answered as done, writing nothing. Who may act is asked
    first, so nobody else learns anything from a retry."""
    v = verdict(act, actor, now_ms=now, lease=lease, epoch=epoch, current_epoch=item.epoch)
    if v.code in IDENTITY_CODES:
        raise refusal(v, lease=lease, epoch=epoch, current_epoch=item.epoch)
    return iv.outcome == outcome and iv.lease_id == lease.id and iv.epoch == epoch


def _ended(iv: Intervention, outcome: str, now: int) -> None:
    iv.outcome, iv.ended_at_ms = outcome, now
    iv.save(update_fields=["outcome", "ended_at_ms", "successor_lease"])


@transaction.atomic(durable=True)
def standing_extend(
    *,
    intervention_pk: int,
    actor: Actor,
    lease_id: Any,
    epoch: int,
    extend_ms: int,
    reason: str,
    request_id: str = "",
) -> Lease:
    """A new absolute expiry `now + extend_ms`, capped by the standing maximum. Same epoch."""
    reason = (reason or "").strip()
    if not reason:
        raise ValidationFailed("an extension needs a reason", param="reason")
    if not isinstance(extend_ms, int) or extend_ms < standing_min_ms():
        raise ValidationFailed("extend by at least a minute", param="extend_ms")
    iv, item, lease, now = _under_standing(intervention_pk, lease_id, epoch)
    before = {"expires_at_ms": lease.expires_at_ms, "epoch": lease.epoch}
    lease_extend_locked(
        lease=lease,
        actor=actor,
        epoch=epoch,
        current_epoch=item.epoch,
        now_ms=now,
        extend_ms=extend_ms,
        reason=reason,
    )
    timeline(
        iv,
        "extended",
        now,
        actor.name,
        reason=reason,
        expires_at_ms=lease.expires_at_ms,
        capped=lease.expires_at_ms == lease.max_expires_at_ms,
    )
    audited(
        act=Act.EXTEND_STANDING,
        actor=actor,
        action="standing.extend",
        obj=iv,
        item=item,
        now=now,
        reason=reason,
        before=before,
        after={"expires_at_ms": lease.expires_at_ms, "epoch": lease.epoch},
        request_id=request_id,
    )
    return lease


@transaction.atomic(durable=True)
def standing_complete(
    *,
    intervention_pk: int,
    actor: Actor,
    lease_id: Any,
    epoch: int,
    note: str = "",
    request_id: str = "",
) -> Intervention:
    """Complete the work under human standing; refused while anything is unreconciled."""
    iv, item, lease, now = _under_standing(intervention_pk, lease_id, epoch)
    before = {"status": "open", **lease_view(lease)}
    work_complete_locked(
        item=item,
        lease=lease,
        actor=actor,
        epoch=epoch,
        now_ms=now,
        reason="completed under human standing",
    )
    _ended(iv, Intervention.Outcome.COMPLETED, now)
    timeline(iv, "completed", now, actor.name, note=note, epoch=lease.epoch)
    audited(
        act=Act.COMPLETE,
        actor=actor,
        action="standing.complete",
        obj=iv,
        item=item,
        now=now,
        reason=note,
        before=before,
        after={"status": "completed"},
        request_id=request_id,
    )
    return iv


@transaction.atomic(durable=True)
def standing_hand_back(
    *,
    intervention_pk: int,
    actor: Actor,
    lease_id: Any,
    epoch: int,
    note: str = "",
    request_id: str = "",
) -> Intervention:
    """Release the human lease to the agent pool: the pool's next acquire raises the epoch
    (no placeholder grant that nobody renews). Refused while effects are unreconciled when
    the queue would refuse agents anyway."""
    iv, item, lease, now = _under_standing(intervention_pk, lease_id, epoch)
    if _retried(
        Act.HAND_BACK,
        iv=iv,
        item=item,
        lease=lease,
        actor=actor,
        epoch=epoch,
        now=now,
        outcome=Intervention.Outcome.HANDED_BACK,
    ):
        return iv
    before = lease_view(lease)
    if item.queue.agent_acquire_needs_reconciliation and unreconciled_effects_exist(item):
        raise NeedsReconciliation(
            "reconcile every effect first: agents cannot take this work back while an "
            "outcome is unknown"
        )
    lease_hand_back_locked(
        lease=lease, actor=actor, epoch=epoch, current_epoch=item.epoch, now_ms=now
    )
    _ended(iv, Intervention.Outcome.HANDED_BACK, now)
    timeline(iv, "handed_back", now, actor.name, note=note, epoch=lease.epoch)
    audited(
        act=Act.HAND_BACK,
        actor=actor,
        action="standing.hand_back",
        obj=iv,
        item=item,
        now=now,
        reason=note or "handed back to the agent pool",
        before=before,
        after={"lease_id": None, "epoch": item.epoch, "next_grant": "agent pool"},
        request_id=request_id,
    )
    return iv


@transaction.atomic(durable=True)
def standing_assign(
    *,
    intervention_pk: int,
    actor: Actor,
    lease_id: Any,
    epoch: int,
    agent_name: str,
    note: str = "",
    request_id: str = "",
) -> Intervention:
    """End the human lease and grant the named agent a lease at a new epoch, in one
    transaction."""
    iv, item, lease, now = _under_standing(intervention_pk, lease_id, epoch)
    if _retried(
        Act.ASSIGN,
        iv=iv,
        item=item,
        lease=lease,
        actor=actor,
        epoch=epoch,
        now=now,
        outcome=Intervention.Outcome.ASSIGNED,
    ):
        return iv
    agent = agent_named(agent_name)
    before = lease_view(lease)
    successor = lease_assign_locked(
        item=item, lease=lease, actor=actor, epoch=epoch, agent=agent, now_ms=now
    )
    iv.successor_lease = successor
    _ended(iv, Intervention.Outcome.ASSIGNED, now)
    timeline(
        iv,
        "assigned",
        now,
        actor.name,
        note=note,
        agent=agent.name,
        lease_id=str(successor.id),
        epoch=successor.epoch,
    )
    audited(
        act=Act.ASSIGN,
        actor=actor,
        action="standing.assign",
        obj=iv,
        item=item,
        now=now,
        reason=note or f"assigned to {agent.name}",
        before=before,
        after=lease_view(successor),
        request_id=request_id,
    )
    return iv


@transaction.atomic(durable=True)
def effect_record_human(
    *,
    intervention_pk: int,
    actor: Actor,
    lease_id: Any,
    epoch: int,
    kind: str,
    target: str,
    outcome: str,
    detail: str = "",
    idempotency_key: str = "",
    request_id: str = "",
) -> Effect:
    """Record an effect the human performed themselves, under their standing's epoch."""
    iv, item, lease, now = _under_standing(intervention_pk, lease_id, epoch)
    kind, target = (kind or "").strip(), (target or "").strip()
    key = (idempotency_key or "").strip()[:200] or f"human:{iv.id}:{now}"
    effect, created = effect_record_locked(
        item=item,
        lease=lease,
        actor=actor,
        epoch=epoch,
        kind=kind,
        target=target,
        outcome=outcome,
        detail=detail,
        idempotency_key=key,
        now_ms=now,
    )
    if not created:
        return effect  # a retried record: answered as before
    timeline(
        iv,
        "effect_recorded",
        now,
        actor.name,
        effect_id=str(effect.id),
        effect_kind=kind,
        target=target,
        outcome=outcome,
        epoch=lease.epoch,
    )
    audited(
        act=Act.PROPOSE_EFFECT,
        actor=actor,
        action="effect.record",
        obj=iv,
        item=item,
        now=now,
        reason=detail,
        before={},
        after={
            "effect_id": str(effect.id),
            "kind": kind,
            "target": target,
            "outcome": outcome,
            "epoch": lease.epoch,
        },
        request_id=request_id,
    )
    return effect
