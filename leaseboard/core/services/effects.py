"""Commit-time authorization of effects, and the outcomes their proposers report.

Every proposal is recorded before anything is attempted, refusals included, in the same
transaction as the decision. A refusal is committed and *then* raised, so the record
survives the error the caller sees. Whether the proposer may act at all is the
authority's answer (leaseboard.core.authority); whether policy allows this effect is the
queue's rules' (leaseboard.core.services.policy).
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet, Subquery

from leaseboard.core.authority import Actor, authorize, ended_detail, verdict
from leaseboard.core.clock import db_now_ms
from leaseboard.core.compiled import CompiledRead, attnames, model_insert
from leaseboard.core.models import Alert, Effect, Executor, Lease, WorkItem
from leaseboard.core.services.alerts import alerts_open, reconciliation_alerts_resolve_if_done
from leaseboard.core.services.fencing import fencing_token_issue
from leaseboard.core.services.jsondocs import json_canonical, json_size_checked
from leaseboard.core.services.leases import lease_expire_if_due_locked, parse_lease_id
from leaseboard.core.services.policy import effect_policy_decide
from leaseboard.core.services.rule_sets import clock_and_policy_version
from leaseboard.core.signals import approval_requested
from leaseboard.core.tracing import Decision, current_trace_id, decided, note_current
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import (
    ERRORS_BY_CODE,
    IdempotencyConflict,
    LeaseboardError,
    LockDelay,
    NotFound,
    ValidationFailed,
)
from leaseboard.domain.fencing import content_digest, token_expiry_ms
from leaseboard.domain.reconciliation import PolicyDecision


def effect_error(effect: Effect) -> LeaseboardError:
    """The error a refused effect answers with, the first time and on every retry."""
    cls = ERRORS_BY_CODE.get(effect.refusal_code, ValidationFailed)
    return cls(
        effect.refusal_detail or cls.title,
        current_epoch=effect.current_epoch,
        your_epoch=effect.epoch,
        effect_id=str(effect.id),
        **({"rule": effect.rule_name} if effect.policy_version is not None else {}),
    )


def parse_effect_id(raw: Any) -> uuid.UUID:
    try:
        return parse_lease_id(raw)
    except NotFound:
        raise NotFound(f"no effect {str(raw)[:60]!r}") from None


def effect_fields_checked(kind: str, target: str, idempotency_key: str, payload: Any) -> None:
    if not kind or len(kind) > 100:
        raise ValidationFailed("kind is 1 to 100 characters", param="kind")
    if not target or len(target) > 500:
        raise ValidationFailed("target is 1 to 500 characters", param="target")
    if not idempotency_key or len(idempotency_key) > 200:
        raise ValidationFailed("idempotency_key is 1 to 200 characters", param="idempotency_key")
    json_size_checked(payload, param="payload", limit=settings.LEASEBOARD_MAX_EFFECT_PAYLOAD_BYTES)


def _same_request(first: Effect, lease_id: uuid.UUID, kind: str, target: str, payload: Any) -> None:
    """A repeated idempotency key must name the same effect; anything else is a conflict,
    never the earlier effect's answer."""
    differs = [
        name
        for name, old, new in (
            ("lease_id", first.lease_id, lease_id),
            ("kind", first.kind, kind),
            ("target", first.target, target),
            ("payload", json_canonical(first.payload), json_canonical(payload)),
        )
        if old != new
    ]
    if differs:
        raise IdempotencyConflict(
            f"idempotency key {first.idempotency_key!r} was used for another effect "
            f"(different {', '.join(differs)})",
            effect_id=str(first.id),
        )


def effect_token_issue(
    effect: Effect, lease: Lease, item: WorkItem, now_ms: int, *, queue: str
) -> str:
    """The effect's token, dying with the standing it proves: at the lease's expiry at the
    moment of issue (a renewal does not stretch it). Its expiry is kept on the effect: a
    successor waits for it while the outcome is unknown (the fence). It names the work
    item's `queue` and the policy version the effect was decided under."""
    effect.token_expires_at_ms = token_expiry_ms(
        lease_expires_at_ms=lease.expires_at_ms,
        now_ms=now_ms,
        max_ttl_ms=settings.FENCING_TOKEN_TTL_MS,
    )
    return fencing_token_issue(
        work_key=item.key,
        epoch=lease.epoch,
        generation=lease.generation,
        lease_id=str(lease.id),
        holder=effect.executor.name if effect.executor else "",
        now_ms=now_ms,
        expires_at_ms=effect.token_expires_at_ms,
        effect_id=str(effect.id),
        digest=effect.content_digest or effect_digest(effect),
        queue=queue,
        policy_version=effect.policy_version,
    )


def effect_digest(effect: Effect) -> str:
    """The digest of what the effect asks: set on the row once, when it is proposed."""
    if not effect.content_digest:
        effect.content_digest = content_digest(effect.kind, effect.target, effect.payload)
    return effect.content_digest


def fence_checked(lease: Lease, now_ms: int) -> None:
    """Under a grant made before the fence passed (a takeover, an assignment), no effect
    is authorized until it has: an older holder's token may still be accepted by a
    recipient that has not seen this epoch. Raised before anything is recorded, so a retry
    with the same idempotency key is decided afresh."""
    if lease.fenced_until_ms > now_ms:
        raise LockDelay(
            "the previous holder's fencing tokens may still be accepted by a recipient that "
            "has not seen this epoch; effects are authorized once they have expired",
            retry_after_ms=lease.fenced_until_ms - now_ms,
            fenced_until_ms=lease.fenced_until_ms,
        )


def effect_decided(
    effect: Effect,
    *,
    decision: str,
    now_ms: int,
    code: str = "",
    detail: str = "",
    user_id: int | None = None,
) -> Effect:
    """Write a decision onto an effect row (new or pending): the one decide-and-save."""
    effect.decision = decision
    effect.refusal_code = code
    effect.refusal_detail = detail[:500]
    effect.decided_at_ms = None if decision == Effect.Decision.PENDING_APPROVAL else now_ms
    effect.decided_by_id = user_id
    if effect._state.adding:
        model_insert(effect)  # what save(force_insert=True) writes, compiled once
    else:
        effect.save(
            update_fields=[
                "decision",
                "refusal_code",
                "refusal_detail",
                "decided_at_ms",
                "decided_by",
                "current_epoch",
                "fencing_token",
                "token_expires_at_ms",
            ]
        )
    return effect


def _effect_decided(span: Decision, effect: Effect) -> None:
    span.note(
        work_key=effect.work_item.key,
        effect_id=str(effect.id),
        decision=effect.decision,
        policy_rule=effect.rule_name,
        current_epoch=effect.current_epoch,
    )
    span.lease(effect.lease)


def _effect_refused(effect: Effect) -> LeaseboardError:
    """The refusal of a committed refused effect, noted on the decision span first."""
    note_current(lambda span: _effect_decided(span, effect))
    return effect_error(effect)


@decided(
    "leaseboard.effect.propose",
    about=lambda kw: {"epoch": kw.get("epoch"), "effect_kind": kw.get("kind")},
    result=_effect_decided,
)
def effect_propose(
    *,
    lease_id: Any,
    executor: Executor,
    epoch: int,
    kind: str,
    target: str,
    idempotency_key: str,
    payload: Any = None,
) -> Effect:
    """Authorize, hold for approval, or refuse (raising after the refusal is committed).
    A repeated idempotency key for the same effect returns the first answer."""
    payload = {} if payload is None else payload
    effect_fields_checked(kind, target, idempotency_key, payload)
    lid = parse_lease_id(lease_id)
    try:
        effect = _effect_decide(
            lease_id=lid,
            executor=executor,
            epoch=epoch,
            kind=kind,
            target=target,
            idempotency_key=idempotency_key,
            payload=payload,
        )
    except IntegrityError:
        # A concurrent retry with the same key won the insert; answer as it was answered.
        effect = Effect.objects.get(executor=executor, idempotency_key=idempotency_key)
        _same_request(effect, lid, kind, target, payload)
    if effect.decision == Effect.Decision.REFUSED:
        raise _effect_refused(effect)
    return effect


def _lease_locked_read(lease_id: uuid.UUID, executor_id: int, key: str) -> QuerySet[Any, Any]:
    first = Effect.objects.filter(executor_id=executor_id, idempotency_key=key).values("id")[:1]
    return (
        Lease.objects.select_for_update(no_key=True, of=("self",))
        .filter(id=lease_id)
        .annotate(first_effect_id=Subquery(first))
        .values_list(
            *attnames(Lease),
            *attnames(WorkItem, "work_item__"),
            *attnames(Executor, "holder__"),
            "first_effect_id",
        )
    )


# The lease under a row lock, with its work item and holder, and the id of an effect this
# executor proposed under the idempotency key (None if none): one statement, compiled once.
_LEASE_LOCKED = CompiledRead(
    _lease_locked_read,
    (uuid.UUID(int=0x5E_17_1E1), -9_000_000_001, "sentinel:effect-idempotency-key"),
    Lease,
    related=(("work_item", WorkItem), ("holder", Executor)),
)


@transaction.atomic(durable=True)
def _effect_decide(
    *,
    lease_id: uuid.UUID,
    executor: Executor,
    epoch: int,
    kind: str,
    target: str,
    idempotency_key: str,
    payload: Any,
) -> Effect:
    # Locking the lease orders us against a revoke or takeover: once that commits, this
    # decision sees the ended lease and the raised epoch. The same statement asks whether
    # the idempotency key was used already; its snapshot may predate our lock wait, and a
    # retry that committed meanwhile makes our insert fail on the key's unique constraint,
    # answered in `effect_propose` as that retry was.
    found = _LEASE_LOCKED.row(lease_id, executor.id, idempotency_key)
    first_id = found[1][0] if found is not None else None
    if found is None:  # no such lease; a key used for another lease is still a conflict
        first = Effect.objects.filter(executor=executor, idempotency_key=idempotency_key).first()
    elif first_id is not None:
        first = Effect.objects.get(id=first_id)
    else:
        first = None
    if first is not None:
        _same_request(first, lease_id, kind, target, payload)
        return first
    if found is None:
        raise NotFound(f"no lease {lease_id}")
    lease = found[0]
    assert isinstance(lease, Lease)
    item = lease.work_item
    now, policy_version, queue_name = clock_and_policy_version(item.queue_id)
    effect = Effect(
        work_item=item,
        lease=lease,
        executor=executor,
        source=Effect.Source.AGENT if executor.kind == "agent" else Effect.Source.HUMAN,
        epoch=epoch,
        current_epoch=item.epoch,
        kind=kind,
        target=target,
        idempotency_key=idempotency_key,
        payload=payload,
        content_digest=content_digest(kind, target, payload),
        proposed_at_ms=now,
        trace_id=current_trace_id(),
    )
    v = verdict(
        Act.PROPOSE_EFFECT,
        Actor.agent(executor),
        now_ms=now,
        lease=lease,
        epoch=epoch,
        current_epoch=item.epoch,
        queue=queue_name,
        held=item.held_at_ms is not None,
    )
    if v.code == "lease_expired":
        lease_expire_if_due_locked(lease, now)  # time decided it; record it with one alert
    if v.code is None:
        fence_checked(lease, now)
    code, detail = v.code, v.detail
    if code in {"lease_expired", "lease_released", "lease_revoked"}:
        detail, _ = ended_detail(lease, code, lease.end_reason or detail)
    elif code == "on_hold" and item.hold_reason:
        detail = f"{detail} ({item.hold_reason})"
    if code is None:
        policy = effect_policy_decide(
            item=item,
            lease=lease,
            executor=executor,
            kind=kind,
            target=target,
            payload=payload,
            now_ms=now,
            policy_version=policy_version,
        )
        effect.rule_name, effect.policy_version = policy.rule, policy.version
        effect.rule_error = policy.error[:300]
        if policy.decision == PolicyDecision.DENY:
            code, detail = "policy_denied", policy.reason
        elif policy.decision == PolicyDecision.REQUIRE_APPROVAL:
            within = policy.decide_within_ms or settings.LEASEBOARD_APPROVAL_DECIDE_WITHIN_MS
            effect.decide_by_ms, effect.on_timeout = now + within, policy.on_timeout
            effect_decided(effect, decision=Effect.Decision.PENDING_APPROVAL, now_ms=now)
            approval_requested.send(Effect, effect=effect)
            return effect
    if code is not None:
        effect_decided(
            effect, decision=Effect.Decision.REFUSED, now_ms=now, code=code, detail=detail
        )
        if code == "stale_epoch":
            _open_stale_alert(effect, lease, now)
        return effect
    effect.fencing_token = effect_token_issue(effect, lease, item, now, queue=queue_name)
    return effect_decided(effect, decision=Effect.Decision.AUTHORIZED, now_ms=now)


def _open_stale_alert(effect: Effect, lease: Lease, now: int) -> None:
    # One alert per stale lease, however many effects it keeps trying.
    alerts_open(
        [
            Alert(
                kind=Alert.Kind.STALE_EFFECT,
                dedupe_key=f"stale_effect:{lease.id}",
                lease=lease,
                work_item_id=effect.work_item_id,
                epoch=effect.epoch,
                message=(
                    f"{effect.executor.name if effect.executor else 'unknown'} tried "
                    f"{effect.kind} at epoch {effect.epoch}; current epoch {effect.current_epoch}"
                ),
                detail={"effect_id": str(effect.id), "target": effect.target},
                due_at_ms=now,
                opened_at_ms=now,
            )
        ]
    )


def effect_record_locked(
    *,
    item: WorkItem,
    lease: Lease,
    actor: Actor,
    epoch: int,
    kind: str,
    target: str,
    outcome: str,
    detail: str,
    idempotency_key: str,
    now_ms: int,
) -> tuple[Effect, bool]:
    """An effect a human performed themselves under their standing: authorized at their
    epoch and reported in one step. Returns (effect, created): a repeated key for the same
    effect answers with the first."""
    if outcome not in Effect.Outcome.values:
        raise ValidationFailed("outcome is applied, failed or unknown", param="outcome")
    effect_fields_checked(kind, target, idempotency_key, {})
    authorize(
        Act.PROPOSE_EFFECT, actor, now_ms=now_ms, lease=lease, epoch=epoch, current_epoch=item.epoch
    )
    first = Effect.objects.filter(executor=lease.holder, idempotency_key=idempotency_key).first()
    if first is not None:
        _same_request(first, lease.id, kind, target, {})
        return first, False
    effect = Effect(
        work_item=item,
        lease=lease,
        executor=lease.holder,
        source=Effect.Source.HUMAN,
        epoch=lease.epoch,
        current_epoch=item.epoch,
        kind=kind,
        target=target,
        idempotency_key=idempotency_key,
        payload={},
        content_digest=content_digest(kind, target, {}),
        proposed_at_ms=now_ms,
        outcome=outcome,
        outcome_detail=(detail or "")[:1000],
        outcome_at_ms=now_ms,
        trace_id=current_trace_id(),
    )
    effect.fencing_token = effect_token_issue(effect, lease, item, now_ms, queue=item.queue.name)
    decided = effect_decided(
        effect, decision=Effect.Decision.AUTHORIZED, now_ms=now_ms, user_id=actor.user_id
    )
    return decided, True


OUTCOME_MOVES = {
    "": {"applied", "failed", "unknown"},
    "unknown": {"applied", "failed", "unknown"},
    "applied": {"applied"},
    "failed": {"failed"},
}


@transaction.atomic(durable=True)
def effect_report_outcome(
    *, effect_id: Any, executor: Executor, outcome: str, detail: str = ""
) -> Effect:
    """The proposer reports what happened. Allowed after the lease ended (the truth about an
    attempt is always welcome); an outcome once known does not change."""
    if outcome not in {"applied", "failed", "unknown"}:
        raise ValidationFailed("outcome is applied, failed or unknown", param="outcome")
    effect = (
        Effect.objects.select_for_update(no_key=True).filter(id=parse_effect_id(effect_id)).first()
    )
    if effect is None:
        raise NotFound(f"no effect {effect_id}")
    authorize(Act.REPORT_OUTCOME, Actor.of_executor(executor), effect=effect)
    if effect.decision != Effect.Decision.AUTHORIZED:
        raise ValidationFailed(f"the effect was {effect.decision}; there is no outcome to report")
    if effect.resolution:
        raise ValidationFailed(f"the effect was already reconciled as {effect.resolution}")
    if outcome not in OUTCOME_MOVES[effect.outcome]:
        raise ValidationFailed(f"the outcome is already {effect.outcome}")
    if effect.outcome != outcome:
        effect.outcome = outcome
        effect.outcome_detail = detail[:1000]
        effect.outcome_at_ms = db_now_ms()
        Effect.objects.filter(id=effect.id, work_item_id=effect.work_item_id).update(
            outcome=outcome,
            outcome_detail=effect.outcome_detail,
            outcome_at_ms=effect.outcome_at_ms,
        )  # keyed by the work item too (tests/architecture/test_sharding.py)
        if outcome != Effect.Outcome.UNKNOWN:  # a late truth may unblock the item
            reconciliation_alerts_resolve_if_done(
                work_item_id=effect.work_item_id, now_ms=effect.outcome_at_ms
            )
    return effect
