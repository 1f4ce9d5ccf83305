"""Acting under human standing: extend it, write a checkpoint, complete the work, hand it
back to the agent pool, assign it to a named agent, record an effect performed by hand,
reconcile.

Every act is the core's (the authority decides; core services write the lease, event and
effect rows); this module keeps the intervention's outcome and timeline and the audit.
Hand-back and assign are compare-and-sets on (lease id, epoch): a retry of an end that
already happened answers as before and changes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction

from leaseboard.core.authority import Actor, authorize, refusal, verdict
from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Checkpoint, Effect, Lease, WorkItem
from leaseboard.core.services.effects import effect_record_locked
from leaseboard.core.services.jsondocs import json_size_checked
from leaseboard.core.services.leases import (
    checkpoint_save_locked,
    lease_assign_locked,
    lease_extend_locked,
    lease_hand_back_locked,
    parse_lease_id,
    unreconciled_effects_exist,
)
from leaseboard.core.services.work import work_complete_locked
from leaseboard.domain.authority import IDENTITY_CODES, Act
from leaseboard.domain.errors import NeedsReconciliation, NotFound, ValidationFailed
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


@dataclass(frozen=True)
class _Standing:
    """An act under standing, its locks taken: the intervention, its work item and lease,
    the clock read after the locks, who acts and the request id."""

    iv: Intervention
    item: WorkItem
    lease: Lease
    now: int
    actor: Actor
    request_id: str

    def retried(self, act: Act, *, epoch: int, outcome: str) -> bool:
        """A retry, by the person who holds the standing, of the end that already happened
        to exactly this (lease, epoch): answered as done, writing nothing. Who may act is
        asked first, so nobody else learns anything from a retry."""
        lease, item = self.lease, self.item
        v = verdict(
            act, self.actor, now_ms=self.now, lease=lease, epoch=epoch, current_epoch=item.epoch
        )
        if v.code in IDENTITY_CODES:
            raise refusal(v, lease=lease, epoch=epoch, current_epoch=item.epoch)
        return (
            self.iv.outcome == outcome and self.iv.lease_id == lease.id and self.iv.epoch == epoch
        )

    def ended(self, outcome: str) -> None:
        iv = self.iv
        iv.outcome, iv.ended_at_ms = outcome, self.now
        iv.save(update_fields=["outcome", "ended_at_ms", "successor_lease"])

    # deliberate: audited's signature (_common.py) plus the timeline's step.
    def recorded(
        self,
        act: Act,
        action: str,
        step: str,
        *,
        audit_reason: str,
        before: dict[str, Any],
        after: dict[str, Any],
        **detail: Any,
    ) -> None:
        """The step on the intervention's timeline (with `detail`) and its audit entry."""
        timeline(self.iv, step, self.now, self.actor.name, **detail)
        # deliberate: the call names each of audited's keywords (_common.py), nothing more.
        audited(
            act=act,
            actor=self.actor,
            action=action,
            obj=self.iv,
            item=self.item,
            now=self.now,
            reason=audit_reason,
            before=before,
            after=after,
            request_id=self.request_id,
        )


def _under_standing(
    intervention_pk: int, lease_id: Any, epoch: int, actor: Actor, request_id: str
) -> _Standing:
    """Lock work item, intervention and its lease; read the clock after the locks."""
    iv, item = locked(Intervention, intervention_pk, what="intervention", related=("grantee",))
    lease = standing_lease_locked(iv=iv, item=item, lease_id=lease_id, epoch=epoch)
    return _Standing(iv, item, lease, db_now_ms(), actor, request_id)


# deliberate: each act under standing is its own durable public service with keyword-only
# arguments (one service per act, as the house style asks); their shared steps are
# _Standing's (lock, retry check, end, timeline and audit), written once above.
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
    at = _under_standing(intervention_pk, lease_id, epoch, actor, request_id)
    lease = at.lease
    before = {"expires_at_ms": lease.expires_at_ms, "epoch": lease.epoch}
    lease_extend_locked(
        lease=lease,
        actor=actor,
        epoch=epoch,
        current_epoch=at.item.epoch,
        now_ms=at.now,
        extend_ms=extend_ms,
        reason=reason,
    )
    at.recorded(
        Act.EXTEND_STANDING,
        "standing.extend",
        "extended",
        audit_reason=reason,
        before=before,
        after={"expires_at_ms": lease.expires_at_ms, "epoch": lease.epoch},
        reason=reason,
        expires_at_ms=lease.expires_at_ms,
        capped=lease.expires_at_ms == lease.max_expires_at_ms,
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
    at = _under_standing(intervention_pk, lease_id, epoch, actor, request_id)
    before = {"status": "open", **lease_view(at.lease)}
    work_complete_locked(
        item=at.item,
        lease=at.lease,
        actor=actor,
        epoch=epoch,
        now_ms=at.now,
        reason="completed under human standing",
    )
    at.ended(Intervention.Outcome.COMPLETED)
    at.recorded(
        Act.COMPLETE,
        "standing.complete",
        "completed",
        audit_reason=note,
        before=before,
        after={"status": "completed"},
        note=note,
        epoch=at.lease.epoch,
    )
    return at.iv


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
    at = _under_standing(intervention_pk, lease_id, epoch, actor, request_id)
    lease, item = at.lease, at.item
    if at.retried(Act.HAND_BACK, epoch=epoch, outcome=Intervention.Outcome.HANDED_BACK):
        return at.iv
    before = lease_view(lease)
    if item.queue.agent_acquire_needs_reconciliation and unreconciled_effects_exist(item):
        raise NeedsReconciliation(
            "reconcile every effect first: agents cannot take this work back while an "
            "outcome is unknown"
        )
    lease_hand_back_locked(
        lease=lease, actor=actor, epoch=epoch, current_epoch=item.epoch, now_ms=at.now
    )
    at.ended(Intervention.Outcome.HANDED_BACK)
    at.recorded(
        Act.HAND_BACK,
        "standing.hand_back",
        "handed_back",
        audit_reason=note or "handed back to the agent pool",
        before=before,
        after={"lease_id": None, "epoch": item.epoch, "next_grant": "agent pool"},
        note=note,
        epoch=lease.epoch,
    )
    return at.iv


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
    at = _under_standing(intervention_pk, lease_id, epoch, actor, request_id)
    if at.retried(Act.ASSIGN, epoch=epoch, outcome=Intervention.Outcome.ASSIGNED):
        return at.iv
    agent = agent_named(agent_name)
    before = lease_view(at.lease)
    successor = lease_assign_locked(
        item=at.item, lease=at.lease, actor=actor, epoch=epoch, agent=agent, now_ms=at.now
    )
    at.iv.successor_lease = successor
    at.ended(Intervention.Outcome.ASSIGNED)
    at.recorded(
        Act.ASSIGN,
        "standing.assign",
        "assigned",
        audit_reason=note or f"assigned to {agent.name}",
        before=before,
        after=lease_view(successor),
        note=note,
        agent=agent.name,
        lease_id=str(successor.id),
        epoch=successor.epoch,
    )
    return at.iv


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
    at = _under_standing(intervention_pk, lease_id, epoch, actor, request_id)
    kind, target = (kind or "").strip(), (target or "").strip()
    key = (idempotency_key or "").strip()[:200] or f"human:{at.iv.id}:{at.now}"
    # deliberate: keyword arguments named one a line; alike in shape only, the values differ.
    effect, created = effect_record_locked(
        item=at.item,
        lease=at.lease,
        actor=actor,
        epoch=epoch,
        kind=kind,
        target=target,
        outcome=outcome,
        detail=detail,
        idempotency_key=key,
        now_ms=at.now,
    )
    if not created:
        return effect  # a retried record: answered as before
    at.recorded(
        Act.PROPOSE_EFFECT,
        "effect.record",
        "effect_recorded",
        audit_reason=detail,
        before={},
        after={
            "effect_id": str(effect.id),
            "kind": kind,
            "target": target,
            "outcome": outcome,
            "epoch": at.lease.epoch,
        },
        effect_id=str(effect.id),
        effect_kind=kind,
        target=target,
        outcome=outcome,
        epoch=at.lease.epoch,
    )
    return effect


def checkpoint_document(text: str) -> Any:
    """A checkpoint typed into a form: a JSON document (not null), or a clear refusal that
    says what and where."""
    try:
        data = json.loads(text or "")
    except json.JSONDecodeError as exc:
        raise ValidationFailed(
            f"the checkpoint is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
            param="data",
        ) from None
    if data is None:
        raise ValidationFailed("the checkpoint is a JSON document, not null", param="data")
    return data


# deliberate: an act under standing, keyword-only like those above; its own lock path.
@transaction.atomic(durable=True)
def standing_checkpoint(
    *,
    lease_id: Any,
    actor: Actor,
    epoch: int,
    document: str,
    note: str = "",
    request_id: str = "",
) -> Checkpoint:
    """Write a checkpoint under human standing, fenced by the standing's epoch (a checkpoint
    for an epoch that moved on, or a standing that ended, is refused as for an agent): the
    next agent to acquire the work reads it. On the intervention's timeline and audited."""
    data = checkpoint_document(document)
    size = json_size_checked(data, param="data", limit=settings.LEASEBOARD_MAX_CHECKPOINT_BYTES)
    lid = parse_lease_id(lease_id)
    iv_pk = Intervention.objects.filter(lease_id=lid).values_list("pk", flat=True).first()
    if iv_pk is None:
        raise NotFound("no standing under that lease")
    at = _under_standing(iv_pk, lid, epoch, actor, request_id)
    authorize(
        Act.CHECKPOINT,
        actor,
        now_ms=at.now,
        lease=at.lease,
        epoch=epoch,
        current_epoch=at.item.epoch,
    )
    cp = checkpoint_save_locked(lease=at.lease, data=data, size=size, now_ms=at.now)
    note = (note or "").strip()[:1000]
    at.recorded(
        Act.CHECKPOINT,
        "standing.checkpoint",
        "checkpointed",
        audit_reason=note or "checkpoint under standing",
        before={"epoch": at.lease.epoch, "seq": cp.seq - 1},
        after={"epoch": cp.epoch, "seq": cp.seq, "size_bytes": size},
        seq=cp.seq,
        epoch=cp.epoch,
        note=note,
    )
    return cp
