"""Approvers decide effects that a queue's policy holds for approval (`require_approval`).

An approval authorizes only while the proposer's lease is current and active; for a lease
that has ended (or an epoch that moved on) the approval is refused and that refusal is
committed, then raised. A lease in jeopardy leaves the effect waiting. Never one's own.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from leaseboard.core.authority import Actor, authorize, refusal, verdict
from leaseboard.core.clock import db_now_ms
from leaseboard.core.locking import work_item_locked
from leaseboard.core.models import Effect, Lease, WorkItem
from leaseboard.core.services.audit import audit_act
from leaseboard.core.services.effects import (
    effect_decided,
    effect_error,
    effect_token_issue,
    parse_effect_id,
)
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import AlreadyDecided, PayloadMismatch, ValidationFailed

# Refusals that end the request: the lease is over or the epoch moved on.
FINAL = frozenset({"stale_epoch", "lease_expired", "lease_released", "lease_revoked"})


def _pending_effect_locked(effect_id: Any) -> tuple[Effect, Lease | None, WorkItem]:
    """Lock, in the core's order, the work item, the waiting effect and its lease."""
    eid = parse_effect_id(effect_id)
    item = work_item_locked(Effect, eid, what="effect")
    effect = (
        Effect.objects.select_for_update(no_key=True, of=("self",))
        .select_related("executor", "decided_by")
        .get(id=eid)
    )
    lease = (
        Lease.objects.select_for_update(no_key=True).filter(id=effect.lease_id).first()
        if effect.lease_id
        else None
    )
    if effect.decision != Effect.Decision.PENDING_APPROVAL:
        # Single use: a decision is made once, by one approver; the second is refused.
        by = f" by {effect.decided_by.get_username()}" if effect.decided_by else ""
        raise AlreadyDecided(
            f"the effect was already decided{by}: {effect.decision}"
            + (f" ({effect.refusal_code})" if effect.refusal_code else ""),
            effect_id=str(effect.id),
            decision=effect.decision,
        )
    return effect, lease, item


def _content_checked(effect: Effect, digest: str | None) -> None:
    """The decision binds to the content the approver was shown: the page sends the digest
    it displayed, and anything else is refused before a thing is written."""
    if digest is not None and digest != effect.content_digest:
        raise PayloadMismatch(
            "the effect is not the one your page showed; reload it and decide again",
            effect_id=str(effect.id),
        )


@transaction.atomic(durable=True)
def _effect_approve(
    *, effect_id: Any, actor: Actor, note: str, request_id: str, digest: str | None
) -> Effect:
    effect, lease, item = _pending_effect_locked(effect_id)
    _content_checked(effect, digest)
    now = db_now_ms()
    v = verdict(
        Act.APPROVE_EFFECT, actor, now_ms=now, lease=lease, current_epoch=item.epoch, effect=effect
    )
    if v.code is not None and v.code not in FINAL:
        # Not this approver's to decide, or only unsure (jeopardy): nothing is written.
        raise refusal(v, lease=lease, current_epoch=item.epoch)
    effect.current_epoch = item.epoch
    if v.code is None:
        assert lease is not None
        effect.fencing_token = effect_token_issue(effect, lease, item, now)
        effect_decided(
            effect, decision=Effect.Decision.AUTHORIZED, now_ms=now, user_id=actor.user_id
        )
    else:
        detail = (lease.end_reason if lease is not None else "") or v.detail
        effect_decided(
            effect,
            decision=Effect.Decision.REFUSED,
            now_ms=now,
            code=v.code,
            detail=detail,
            user_id=actor.user_id,
        )
    audit_act(
        act=Act.APPROVE_EFFECT,
        actor=actor,
        action="effect.approve" if v.code is None else "effect.approve_refused",
        object_type="effect",
        object_id=str(effect.id),
        work_item=item,
        at_ms=now,
        reason=note or v.detail,
        before={"decision": "pending_approval", "epoch": effect.epoch, **_content(effect)},
        after={
            "decision": effect.decision,
            "refusal_code": v.code or "",
            "current_epoch": item.epoch,
            "content_digest": effect.content_digest,
        },
        request_id=request_id,
    )
    return effect


def _content(effect: Effect) -> dict[str, Any]:
    """What was decided on, as the audit entry keeps it."""
    return {
        "kind": effect.kind,
        "target": effect.target,
        "payload": effect.payload,
        "content_digest": effect.content_digest,
    }


def effect_approve(
    *,
    effect_id: Any,
    actor: Actor,
    note: str = "",
    request_id: str = "",
    digest: str | None = None,
) -> Effect:
    """Authorize a waiting effect only if its lease is still current and active; otherwise
    the refusal (with its stale code) is committed, then raised. `digest`: the content the
    approver was shown (refused as payload_mismatch if the effect is not that)."""
    effect = _effect_approve(
        effect_id=effect_id, actor=actor, note=note, request_id=request_id, digest=digest
    )
    if effect.decision == Effect.Decision.REFUSED:
        raise effect_error(effect)
    return effect


@transaction.atomic(durable=True)
def effect_reject(
    *, effect_id: Any, actor: Actor, note: str, request_id: str = "", digest: str | None = None
) -> Effect:
    note = (note or "").strip()
    if not note:
        raise ValidationFailed("a rejection needs a note", param="note")
    effect, lease, item = _pending_effect_locked(effect_id)
    _content_checked(effect, digest)
    now = db_now_ms()
    authorize(Act.REJECT_EFFECT, actor, now_ms=now, lease=lease, effect=effect)
    effect.current_epoch = item.epoch
    effect_decided(
        effect,
        decision=Effect.Decision.REFUSED,
        now_ms=now,
        code="policy_denied",
        detail=f"rejected by {actor.name}: {note}",
        user_id=actor.user_id,
    )
    audit_act(
        act=Act.REJECT_EFFECT,
        actor=actor,
        action="effect.reject",
        object_type="effect",
        object_id=str(effect.id),
        work_item=item,
        at_ms=now,
        reason=note,
        before={"decision": "pending_approval", **_content(effect)},
        after={"decision": "refused", "refusal_code": "policy_denied"},
        request_id=request_id,
    )
    return effect
