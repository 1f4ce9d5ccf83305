"""The steps of an effect's commit-time decision, in the order they run: may the proposer
act at all (the authority, the fence), does policy allow it (the queue's rules), and the
one write of the decision onto the effect row. A refusal is a decision like any other:
recorded, then raised by the caller once committed (leaseboard.core.services.effects)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from leaseboard.core.authority import Actor, ended_detail, verdict
from leaseboard.core.compiled import model_insert
from leaseboard.core.models import Alert, Effect, Executor, Lease, WorkItem
from leaseboard.core.services.alerts import alerts_open
from leaseboard.core.services.leases import lease_expire_if_due_locked
from leaseboard.core.services.policy import effect_policy_decide
from leaseboard.core.signals import approval_requested
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import ERRORS_BY_CODE, LeaseboardError, LockDelay, ValidationFailed
from leaseboard.domain.reconciliation import PolicyDecision

ENDED = {"lease_expired", "lease_released", "lease_revoked"}


@dataclass(frozen=True)
class Refusal:
    code: str
    detail: str


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


# deliberate: a keyword-only signature, alike in shape with other services' only.
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


def effect_standing_refusal(
    *, lease: Lease, item: WorkItem, executor: Executor, epoch: int, now_ms: int, queue: str
) -> Refusal | None:
    """Step one: may this agent act under this lease at this epoch, now (the authority's
    verdict), and has the fence its grant carries passed (raised: nothing recorded)? A
    lease found past its expiry is expired here, with its one alert."""
    v = verdict(
        Act.PROPOSE_EFFECT,
        Actor.agent(executor),
        now_ms=now_ms,
        lease=lease,
        epoch=epoch,
        current_epoch=item.epoch,
        queue=queue,
        held=item.held_at_ms is not None,
    )
    if v.code is None:
        fence_checked(lease, now_ms)
        return None
    if v.code == "lease_expired":
        lease_expire_if_due_locked(lease, now_ms)  # time decided it; record it with one alert
    detail = v.detail
    if v.code in ENDED:
        detail, _ = ended_detail(lease, v.code, lease.end_reason or detail)
    elif v.code == "on_hold" and item.hold_reason:
        detail = f"{detail} ({item.hold_reason})"
    return Refusal(v.code, detail)


def effect_policy_step(
    effect: Effect, *, policy_version: int | None, now_ms: int
) -> Refusal | None:
    """Step two: the queue's rules. Deny is a refusal; require-approval records the effect
    as pending (with its deadline) and asks the approvers; allow returns None with the
    effect still undecided, for the token."""
    assert effect.lease is not None and effect.executor is not None
    # deliberate: keyword arguments named one a line; alike in shape only, the values differ.
    policy = effect_policy_decide(
        item=effect.work_item,
        lease=effect.lease,
        executor=effect.executor,
        kind=effect.kind,
        target=effect.target,
        payload=effect.payload,
        now_ms=now_ms,
        policy_version=policy_version,
    )
    effect.rule_name, effect.policy_version = policy.rule, policy.version
    effect.rule_error = policy.error[:300]
    if policy.decision == PolicyDecision.DENY:
        return Refusal("policy_denied", policy.reason)
    if policy.decision == PolicyDecision.REQUIRE_APPROVAL:
        within = policy.decide_within_ms or settings.LEASEBOARD_APPROVAL_DECIDE_WITHIN_MS
        effect.decide_by_ms, effect.on_timeout = now_ms + within, policy.on_timeout
        effect_decided(effect, decision=Effect.Decision.PENDING_APPROVAL, now_ms=now_ms)
        approval_requested.send(Effect, effect=effect)
    return None


def effect_refusal_record(effect: Effect, refusal: Refusal, now_ms: int) -> Effect:
    """Record a refusal; a stale epoch also opens the lease's one stale-effect alert."""
    effect_decided(
        effect,
        decision=Effect.Decision.REFUSED,
        now_ms=now_ms,
        code=refusal.code,
        detail=refusal.detail,
    )
    if refusal.code == "stale_epoch":
        _stale_alert_open(effect, now_ms)
    return effect


def _stale_alert_open(effect: Effect, now: int) -> None:
    # One alert per stale lease, however many effects it keeps trying.
    # deliberate: an Alert named field by field, as every alert its kind opens (alerts_open).
    alerts_open(
        [
            Alert(
                kind=Alert.Kind.STALE_EFFECT,
                dedupe_key=f"stale_effect:{effect.lease_id}",
                lease_id=effect.lease_id,
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
