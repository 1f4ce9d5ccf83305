"""Approvers decide effects that a queue's policy holds for approval (`require_approval`).

An approval authorizes only while the proposer's lease is current and active; for a lease
that has ended (or an epoch that moved on) the approval is refused and that refusal is
committed, then raised. A lease in jeopardy leaves the effect waiting. Never one's own.

A decision is server-held and single use: made once (a second is `already_decided`), bound
to the approver who made it (`decided_by`, the audit entry) and to the content shown (its
digest). Undecided by `decide_by_ms`, the request takes its rule's `on_timeout` decision —
reject unless the rule says approve, and an approve-on-timeout is still only granted if
the proposer could propose it now — applied by the sweep, or by whichever decision comes
late (`approval_expired`).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from leaseboard.core.authority import Actor, authorize, refusal, verdict
from leaseboard.core.clock import DbNowMs, db_now_ms
from leaseboard.core.locking import work_item_locked
from leaseboard.core.models import Effect, Lease, WorkItem
from leaseboard.core.services.audit import audit_act, audit_record
from leaseboard.core.services.effects import (
    effect_decided,
    effect_error,
    effect_token_issue,
    parse_effect_id,
)
from leaseboard.core.tracing import Decision, decided
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import (
    AlreadyDecided,
    ApprovalExpired,
    PayloadMismatch,
    ValidationFailed,
)

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


def _timed_out_locked(
    effect: Effect, lease: Lease | None, item: WorkItem, now: int, request_id: str = ""
) -> bool:
    """Past its decide-by time, apply the rule's default decision (True); else False. An
    approve-on-timeout authorizes only what the proposer could be authorized now."""
    if effect.decide_by_ms is None or now < effect.decide_by_ms:
        return False
    effect.current_epoch = item.epoch
    code: str | None = "approval_expired"
    detail = "nobody decided in time; the rule's default: reject"
    if effect.on_timeout == "approve" and effect.approver_reached_at_ms is None:
        # Silence is not consent: an approver who was never told cannot have let it pass.
        detail = (
            "nobody decided in time, and no notice reached an approver: rejected instead "
            "of the rule's default (approve)"
        )
    elif effect.on_timeout == "approve" and effect.executor is not None:
        v = verdict(
            Act.PROPOSE_EFFECT,
            Actor.agent(effect.executor),
            now_ms=now,
            lease=lease,
            epoch=effect.epoch,
            current_epoch=item.epoch,
            queue=item.queue.name,
            held=item.held_at_ms is not None,
        )
        code, detail = v.code, v.detail
        if code is None and lease is not None and lease.fenced_until_ms > now:
            code, detail = "lock_delay", "the previous holder's tokens may still be accepted"
        if code is not None:
            detail = f"nobody decided in time; the default (approve) was refused: {detail}"
    if code is None:
        assert lease is not None
        effect.fencing_token = effect_token_issue(effect, lease, item, now, queue=item.queue.name)
        effect_decided(effect, decision=Effect.Decision.AUTHORIZED, now_ms=now)
    else:
        effect_decided(
            effect, decision=Effect.Decision.REFUSED, now_ms=now, code=code, detail=detail
        )
    audit_record(
        at_ms=now,
        actor_name="sweep",
        actor_role="system",
        action="effect.approval_expired",
        object_type="effect",
        object_id=str(effect.id),
        work_item=item,
        reason=f"not decided by its deadline; on_timeout={effect.on_timeout or 'reject'}",
        before={"decision": "pending_approval", **_content(effect)},
        after={"decision": effect.decision, "refusal_code": code or ""},
        request_id=request_id,
    )
    return True


@transaction.atomic(durable=True)
def effect_approver_reached(*, effect_id: Any) -> bool:
    """A notice about this waiting effect reached an approver (the first time counts).
    Written by the notice delivery; read by the timeout above."""
    return bool(
        Effect.objects.filter(
            id=effect_id,
            decision=Effect.Decision.PENDING_APPROVAL,
            approver_reached_at_ms__isnull=True,
        ).update(approver_reached_at_ms=db_now_ms())
    )


@transaction.atomic(durable=True)
def effect_approval_expire(*, effect_id: Any) -> bool:
    """The sweep's step for one due request: True if the default decision was applied."""
    try:
        effect, lease, item = _pending_effect_locked(effect_id)
    except AlreadyDecided:
        return False  # decided (or expired by another sweep) since it was listed
    return _timed_out_locked(effect, lease, item, db_now_ms())


def approvals_expire_due(*, batch: int = 500) -> int:
    """Apply the default decision to requests past their decide-by time (index
    effect_decide_by_idx: proportional to the due rows), each in its own transaction."""
    due = list(
        Effect.objects.filter(
            decision=Effect.Decision.PENDING_APPROVAL, decide_by_ms__lte=DbNowMs()
        )
        .order_by("decide_by_ms")
        .values_list("id", flat=True)[:batch]
    )
    return sum(effect_approval_expire(effect_id=eid) for eid in due)


@transaction.atomic(durable=True)
def _effect_approve(
    *, effect_id: Any, actor: Actor, note: str, request_id: str, digest: str | None
) -> Effect:
    effect, lease, item = _pending_effect_locked(effect_id)
    _content_checked(effect, digest)
    now = db_now_ms()
    authorize(Act.REJECT_EFFECT, actor, now_ms=now, lease=lease, effect=effect)  # who
    if _timed_out_locked(effect, lease, item, now, request_id):
        return effect
    now = db_now_ms()
    v = verdict(
        Act.APPROVE_EFFECT,
        actor,
        now_ms=now,
        lease=lease,
        current_epoch=item.epoch,
        effect=effect,
        held=item.held_at_ms is not None,
    )
    if v.code is not None and v.code not in FINAL:
        # Not this approver's to decide, or only unsure (jeopardy): nothing is written.
        raise refusal(v, lease=lease, current_epoch=item.epoch)
    effect.current_epoch = item.epoch
    if v.code is None:
        assert lease is not None
        effect.fencing_token = effect_token_issue(effect, lease, item, now, queue=item.queue.name)
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
    # deliberate: audit_act's keywords one a line; each act records its own before and after.
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


# deliberate: the effect's content named key by key, as the audit entry keeps it.
def _content(effect: Effect) -> dict[str, Any]:
    """What was decided on, as the audit entry keeps it."""
    return {
        "kind": effect.kind,
        "target": effect.target,
        "payload": effect.payload,
        "content_digest": effect.content_digest,
    }


def _approval_decided(span: Decision, effect: Effect) -> None:
    span.note(
        decision=effect.decision,
        work_key=effect.work_item.key,
        code=effect.refusal_code,
        policy_rule=effect.rule_name,
        effect_id=str(effect.id),
        epoch=effect.epoch,
        current_epoch=effect.current_epoch,
    )


# deliberate: a keyword-only signature, alike in shape with other services' only.
@decided(
    "leaseboard.effect.approve",
    about=lambda kw: {"effect_id": str(kw["effect_id"])},
    result=_approval_decided,
)
# deliberate: a keyword-only signature, alike in shape with other services' only.
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
    _raise_if_expired(effect)
    if effect.decision == Effect.Decision.REFUSED:
        raise effect_error(effect)
    return effect


@decided(
    "leaseboard.effect.reject",
    about=lambda kw: {"effect_id": str(kw["effect_id"])},
    result=_approval_decided,
)
def effect_reject(
    *, effect_id: Any, actor: Actor, note: str, request_id: str = "", digest: str | None = None
) -> Effect:
    """Refuse a waiting effect with a note (policy_denied)."""
    effect = _effect_reject(
        effect_id=effect_id, actor=actor, note=note, request_id=request_id, digest=digest
    )
    _raise_if_expired(effect)
    return effect


def _raise_if_expired(effect: Effect) -> None:
    """A decision that came after the deadline: the default decision was applied (and is
    committed); the late approver is told so."""
    if effect.decided_by_id is None and effect.decision != Effect.Decision.PENDING_APPROVAL:
        raise ApprovalExpired(
            f"nobody decided in time: the default decision applied ({effect.decision}"
            + (f", {effect.refusal_code})" if effect.refusal_code else ")"),
            effect_id=str(effect.id),
            decision=effect.decision,
        )


@transaction.atomic(durable=True)
def _effect_reject(
    *, effect_id: Any, actor: Actor, note: str, request_id: str, digest: str | None
) -> Effect:
    note = (note or "").strip()
    if not note:
        raise ValidationFailed("a rejection needs a note", param="note")
    effect, lease, item = _pending_effect_locked(effect_id)
    _content_checked(effect, digest)
    now = db_now_ms()
    authorize(Act.REJECT_EFFECT, actor, now_ms=now, lease=lease, effect=effect)
    if _timed_out_locked(effect, lease, item, now, request_id):
        return effect
    effect.current_epoch = item.epoch
    effect_decided(
        effect,
        decision=Effect.Decision.REFUSED,
        now_ms=now,
        code="policy_denied",
        detail=f"rejected by {actor.name}: {note}",
        user_id=actor.user_id,
    )
    # deliberate: audit_act's keywords one a line; each act records its own before and after.
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
