"""Commit-time authorization of effects, and the outcomes their proposers report.

Every proposal is recorded before anything is attempted, refusals included, in the same
transaction as the decision. A refusal is committed and *then* raised, so the record
survives the error the caller sees. Whether the proposer may act at all is the
authority's answer (leaseboard.core.authority); whether policy allows this effect is the
queue's rules' (leaseboard.core.services.policy).

Here: the proposal and the outcome report, end to end. Their pieces, by subject: the
decision's steps (effect_decisions), idempotency keys (effect_idempotency) and the
effect's token (effect_tokens).
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet, Subquery

from leaseboard.core.authority import Actor, authorize
from leaseboard.core.clock import db_now_ms
from leaseboard.core.compiled import CompiledRead, attnames
from leaseboard.core.models import Effect, Executor, Lease, WorkItem
from leaseboard.core.services.alerts import reconciliation_alerts_resolve_if_done

# effect_decided, effect_error and effect_token_issue are answered from here as before
# (approvals decide pending effects with them): re-exported explicitly.
from leaseboard.core.services.effect_decisions import (
    effect_decided as effect_decided,
)
from leaseboard.core.services.effect_decisions import (
    effect_error as effect_error,
)
from leaseboard.core.services.effect_decisions import (
    effect_policy_step,
    effect_refusal_record,
    effect_standing_refusal,
)
from leaseboard.core.services.effect_idempotency import (
    effect_first_under_key,
    effect_same_request,
)
from leaseboard.core.services.effect_tokens import effect_token_issue as effect_token_issue
from leaseboard.core.services.jsondocs import json_size_checked
from leaseboard.core.services.leases import parse_lease_id
from leaseboard.core.services.rule_sets import clock_and_policy_version
from leaseboard.core.tracing import Decision, current_trace_id, decided, note_current
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import LeaseboardError, NotFound, ValidationFailed
from leaseboard.domain.fencing import content_digest
from leaseboard.domain.reconciliation import effect_names_checked


def parse_effect_id(raw: Any) -> uuid.UUID:
    try:
        return parse_lease_id(raw)
    except NotFound:
        raise NotFound(f"no effect {str(raw)[:60]!r}") from None


def effect_fields_checked(kind: str, target: str, idempotency_key: str, payload: Any) -> None:
    effect_names_checked(kind, target)
    if not idempotency_key or len(idempotency_key) > 200:
        raise ValidationFailed("idempotency_key is 1 to 200 characters", param="idempotency_key")
    json_size_checked(payload, param="payload", limit=settings.LEASEBOARD_MAX_EFFECT_PAYLOAD_BYTES)


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
        effect_same_request(effect, lid, kind, target, payload)
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
    first = effect_first_under_key(
        found is not None, found[1][0] if found else None, executor, idempotency_key
    )
    if first is not None:
        effect_same_request(first, lease_id, kind, target, payload)
        return first
    if found is None:
        raise NotFound(f"no lease {lease_id}")
    lease = found[0]
    assert isinstance(lease, Lease)
    item = lease.work_item
    now, policy_version, queue_name = clock_and_policy_version(item.queue_id)
    # deliberate: the Effect row named field by field.
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
    refusal = effect_standing_refusal(
        lease=lease, item=item, executor=executor, epoch=epoch, now_ms=now, queue=queue_name
    ) or effect_policy_step(effect, policy_version=policy_version, now_ms=now)
    if refusal is not None:
        return effect_refusal_record(effect, refusal, now)
    if effect.decision == Effect.Decision.PENDING_APPROVAL:
        return effect
    effect.fencing_token = effect_token_issue(effect, lease, item, now, queue=queue_name)
    return effect_decided(effect, decision=Effect.Decision.AUTHORIZED, now_ms=now)


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
        effect_same_request(first, lease.id, kind, target, {})
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
