"""Commit-time authorization of effects, outcome reports, and reconciliation.

Every proposal is recorded before anything is attempted, refusals included, in the same
transaction as the decision. A refusal is committed and *then* raised, so the record
survives the error the caller sees.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Alert, Effect, EffectPolicy, Executor, Lease
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.core.services.alerts import alerts_open
from leaseboard.core.services.audit import audit_record
from leaseboard.core.services.fencing import fencing_token_issue
from leaseboard.core.services.jsondocs import json_size_checked
from leaseboard.core.services.leases import lease_expire_if_due_locked, parse_lease_id
from leaseboard.domain.certainty import Certainty, LeaseTimes, state_at
from leaseboard.domain.errors import (
    ENDED_STATE_ERRORS,
    Forbidden,
    InJeopardy,
    LeaseboardError,
    NotFound,
    NotHolder,
    PolicyDenied,
    StaleEpoch,
    ValidationFailed,
)
from leaseboard.domain.reconciliation import PolicyDecision, policy_for

REFUSAL_ERRORS: dict[str, type[LeaseboardError]] = {
    "stale_epoch": StaleEpoch,
    "not_holder": NotHolder,
    "in_jeopardy": InJeopardy,
    "policy_denied": PolicyDenied,
    **{cls.code: cls for cls in ENDED_STATE_ERRORS.values()},
}


def effect_error(effect: Effect) -> LeaseboardError:
    """The error a refused effect answers with, the first time and on every retry."""
    cls = REFUSAL_ERRORS.get(effect.refusal_code, ValidationFailed)
    return cls(
        effect.refusal_detail or cls.title,
        current_epoch=effect.current_epoch,
        your_epoch=effect.epoch,
        effect_id=str(effect.id),
    )


def _policy(queue_id: int, kind: str) -> str:
    rules = dict(EffectPolicy.objects.filter(queue_id=queue_id).values_list("kind", "decision"))
    return policy_for(kind, rules, PolicyDecision.ALLOW) if rules else PolicyDecision.ALLOW


def _validate(kind: str, target: str, idempotency_key: str, payload: Any) -> None:
    if not kind or len(kind) > 100:
        raise ValidationFailed("kind is 1 to 100 characters", param="kind")
    if not target or len(target) > 500:
        raise ValidationFailed("target is 1 to 500 characters", param="target")
    if not idempotency_key or len(idempotency_key) > 200:
        raise ValidationFailed("idempotency_key is 1 to 200 characters", param="idempotency_key")
    json_size_checked(payload, param="payload", limit=settings.LEASEBOARD_MAX_EFFECT_PAYLOAD_BYTES)


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
    A repeated idempotency key returns the first answer."""
    payload = {} if payload is None else payload
    _validate(kind, target, idempotency_key, payload)
    try:
        effect = _effect_decide(
            lease_id=lease_id,
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
    if effect.decision == Effect.Decision.REFUSED:
        raise effect_error(effect)
    return effect


@transaction.atomic(durable=True)
def _effect_decide(
    *,
    lease_id: Any,
    executor: Executor,
    epoch: int,
    kind: str,
    target: str,
    idempotency_key: str,
    payload: Any,
) -> Effect:
    first = Effect.objects.filter(executor=executor, idempotency_key=idempotency_key).first()
    if first is not None:
        return first
    lid = parse_lease_id(lease_id)
    # Locking the lease orders us against a revoke or takeover: once that commits, this
    # decision sees the ended lease and the raised epoch.
    lease = (
        Lease.objects.select_for_update(no_key=True, of=("self",))
        .select_related("work_item", "holder")
        .filter(id=lid)
        .first()
    )
    if lease is None:
        raise NotFound(f"no lease {lid}")
    now = db_now_ms()
    item = lease.work_item
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
        proposed_at_ms=now,
        decided_at_ms=now,
    )
    code, detail = _refusal(lease, executor, epoch, now)
    if code is None:
        decision = _policy(item.queue_id, kind)
        if decision == PolicyDecision.DENY:
            code, detail = "policy_denied", f"queue policy denies {kind!r}"
    if code is not None:
        effect.decision = Effect.Decision.REFUSED
        effect.refusal_code = code
        effect.refusal_detail = detail
        effect.save(force_insert=True)
        if code == "stale_epoch":
            _open_stale_alert(effect, lease, now)
        return effect
    if decision == PolicyDecision.REQUIRE_APPROVAL:
        effect.decision = Effect.Decision.PENDING_APPROVAL
        effect.decided_at_ms = None
        effect.save(force_insert=True)
        return effect
    effect.decision = Effect.Decision.AUTHORIZED
    effect.fencing_token = fencing_token_issue(
        work_key=item.key,
        epoch=lease.epoch,
        lease_id=str(lease.id),
        holder=executor.name,
        now_ms=now,
        expires_at_ms=now + settings.FENCING_TOKEN_TTL_MS,
        effect_id=str(effect.id),
    )
    effect.save(force_insert=True)
    return effect


def _refusal(lease: Lease, executor: Executor, epoch: int, now: int) -> tuple[str | None, str]:
    item = lease.work_item
    if lease.holder_id != executor.id:
        return "not_holder", "this lease is held by another executor"
    if epoch != lease.epoch or item.epoch != epoch:
        return "stale_epoch", f"epoch {epoch} is stale; the work item is at epoch {item.epoch}"
    if lease.state not in LIVE_STATES:
        return lease.state and ENDED_STATE_ERRORS[lease.state].code, (
            lease.end_reason or f"the lease is {lease.state}"
        )
    if lease_expire_if_due_locked(lease, now):
        return "lease_expired", "the lease's ttl elapsed"
    times = LeaseTimes(Certainty(lease.state), lease.jeopardy_at_ms, lease.expires_at_ms)
    if state_at(times, now) is Certainty.JEOPARDY:
        return "in_jeopardy", "the lease missed its renewals; renew before new effects"
    return None, ""


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
    effect = Effect.objects.select_for_update(no_key=True).filter(id=_uuid(effect_id)).first()
    if effect is None:
        raise NotFound(f"no effect {effect_id}")
    if effect.executor_id != executor.id:
        raise NotHolder("only the executor that proposed an effect reports its outcome")
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
        effect.save(update_fields=["outcome", "outcome_detail", "outcome_at_ms"])
    return effect


def _uuid(raw: Any):  # type: ignore[no-untyped-def]
    try:
        return parse_lease_id(raw)
    except NotFound:
        raise NotFound(f"no effect {str(raw)[:60]!r}") from None


@transaction.atomic(durable=True)
def effect_reconcile(
    *,
    effect_id: Any,
    actor: Executor,
    resolution: str,
    note: str,
    lease_id: Any = None,
    epoch: int | None = None,
    actor_user_id: int | None = None,
    actor_role: str = "agent",
    request_id: str = "",
) -> Effect:
    """Mark an unreconciled effect confirmed, not applied or compensated, with a note.
    An agent may do so only as the successor: the current live holder of the work item.
    A human's role is checked by the caller (dashboard)."""
    if resolution not in {"confirmed", "not_applied", "compensated"}:
        raise ValidationFailed("resolution is confirmed, not_applied or compensated")
    if not note.strip():
        raise ValidationFailed("a reconciliation needs a note", param="note")
    effect = (
        Effect.objects.select_for_update(no_key=True, of=("self",))
        .select_related("work_item")
        .filter(id=_uuid(effect_id))
        .first()
    )
    if effect is None:
        raise NotFound(f"no effect {effect_id}")
    now = db_now_ms()
    if actor.kind == Executor.Kind.AGENT:
        if lease_id is None or epoch is None:
            raise Forbidden("an agent reconciles only as the successor, under its lease")
        successor = Lease.objects.filter(id=parse_lease_id(lease_id)).first()
        if (
            successor is None
            or successor.holder_id != actor.id
            or successor.work_item_id != effect.work_item_id
            or successor.state not in LIVE_STATES
            or successor.epoch != epoch
            or successor.epoch != effect.work_item.epoch
            or successor.epoch <= effect.epoch
        ):
            raise Forbidden("only the current holder of a later epoch may reconcile this effect")
    if not effect.needs_reconciliation:
        raise ValidationFailed("this effect does not need reconciliation")
    before = {"outcome": effect.outcome, "resolution": ""}
    effect.resolution = resolution
    effect.resolution_note = note[:1000]
    effect.resolved_at_ms = now
    effect.resolved_by = actor
    effect.save(update_fields=["resolution", "resolution_note", "resolved_at_ms", "resolved_by"])
    audit_record(
        at_ms=now,
        actor_user_id=actor_user_id,
        actor_name=actor.name,
        actor_role=actor_role,
        action="effect.reconcile",
        object_type="effect",
        object_id=str(effect.id),
        work_item=effect.work_item,
        reason=note,
        before=before,
        after={"resolution": resolution},
        request_id=request_id,
    )
    return effect


@transaction.atomic(durable=True)
def recipient_report_record(
    *,
    executor: Executor,
    work_key: str,
    reason: str,
    recipient: str,
    epoch: int | None = None,
    high_water: int | None = None,
    detail: str = "",
    token: str | None = None,
) -> Effect:
    """A recipient's guard refused an effect (stale epoch, forged or expired token): keep it
    in the work item's effect history and raise one alert per (work item, epoch, reason)."""
    import uuid

    from leaseboard.core.models import WorkItem

    item = WorkItem.objects.filter(key=work_key).first()
    if item is None:
        raise NotFound(f"no work item {work_key!r}")
    now = db_now_ms()
    lease = Lease.objects.filter(work_item=item, epoch=epoch).first() if epoch else None
    effect = Effect.objects.create(
        work_item=item,
        lease=lease,
        executor=executor,
        source=Effect.Source.RECIPIENT,
        epoch=epoch or 0,
        current_epoch=item.epoch,
        kind=f"recipient.{reason}",
        target=recipient,
        idempotency_key=f"recipient-report:{uuid.uuid4()}",
        payload={"high_water": high_water, "token": (token or "")[:200]},
        decision=Effect.Decision.REFUSED,
        refusal_code=reason,
        refusal_detail=(detail or f"{recipient} refused epoch {epoch} ({reason})")[:500],
        proposed_at_ms=now,
        decided_at_ms=now,
    )
    alerts_open(
        [
            Alert(
                kind=Alert.Kind.RECIPIENT_REFUSAL,
                dedupe_key=f"recipient:{item.id}:{epoch}:{reason}",
                lease=lease,
                work_item=item,
                epoch=epoch,
                message=f"{recipient} refused an effect at epoch {epoch} ({reason}); "
                f"current epoch {item.epoch}",
                detail={"effect_id": str(effect.id), "high_water": high_water},
                due_at_ms=now,
                opened_at_ms=now,
            )
        ]
    )
    return effect
