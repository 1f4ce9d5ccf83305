"""Commit-time policy: which rule decides a proposed effect, and why: the rules for every
queue first, then the queue's own, which can only tighten them.

`effect_policy_decide` is what the effect service asks (inside its transaction, after the
authority allowed the proposer); `policy_explain` answers the same question for a
hypothetical proposal without recording anything. Both read the rule set once per
(queue, policy_version) per process — a change raises the version in its own transaction
— and gather only the evidence the rules' conditions read. The rules themselves are
decided in leaseboard.domain.policy. Nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import (
    Checkpoint,
    Effect,
    Executor,
    Lease,
    Queue,
    WorkItem,
)
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.core.services.rule_sets import QueuePolicy, queue_policy
from leaseboard.domain.errors import NotFound, ValidationFailed
from leaseboard.domain.expressions import NO_CHECKPOINT_AGE_S, FactLimits, bounded_activation
from leaseboard.domain.policy import (
    GLOBAL_PREFIX,
    Layered,
    RuleSet,
    RuleSpec,
    Ruling,
    decide_layered,
)
from leaseboard.domain.reconciliation import PolicyDecision, effect_names_checked


@dataclass
class Facts:
    """What the conditions may read (leaseboard.domain.expressions.VARIABLES)."""

    values: dict[str, Any] = field(default_factory=dict)

    def shown(self) -> dict[str, Any]:
        return {
            k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in self.values.items()
        }


def _facts(
    policy: QueuePolicy,
    *,
    kind: str,
    target: str,
    payload: Any,
    item: WorkItem | None,
    lease: Lease | None,
    executor: Executor | None,
    now_ms: int,
    reads: frozenset[str] | None = None,
) -> Facts:
    reads = policy.reads if reads is None else reads
    values: dict[str, Any] = {
        "payload": payload if isinstance(payload, dict) else {},
        "effect.kind": kind,
        "effect.target": target,
        "work.key": item.key if item else "",
        "work.queue": policy.queue_name,
        "work.scope": item.scope if item and isinstance(item.scope, dict) else {},
        "agent.name": executor.name if executor else "",
        "lease.epoch": lease.epoch if lease else 0,
        "lease.age_s": max(0, (now_ms - lease.granted_at_ms) // 1000) if lease else 0,
        "now": datetime.fromtimestamp(now_ms / 1000, UTC),
    }
    if reads & {"evidence.has_checkpoint", "evidence.checkpoint_age_s"}:
        last = (
            Checkpoint.objects.filter(work_item=item).order_by("-seq").values_list("at_ms").first()
            if item
            else None
        )
        values["evidence.has_checkpoint"] = last is not None
        values["evidence.checkpoint_age_s"] = (
            max(0, (now_ms - last[0]) // 1000) if last else NO_CHECKPOINT_AGE_S
        )
    if "evidence.effects_authorized" in reads:
        values["evidence.effects_authorized"] = (
            Effect.objects.filter(lease=lease, decision=Effect.Decision.AUTHORIZED).count()
            if lease
            else 0
        )
    return Facts(values)


def fact_limits() -> FactLimits:
    """What a condition may read, from the settings (LEASEBOARD_RULE_MAX_ITEMS, _DEPTH)."""
    return FactLimits(
        max_items=settings.LEASEBOARD_RULE_MAX_ITEMS, max_depth=settings.LEASEBOARD_RULE_MAX_DEPTH
    )


@dataclass(frozen=True)
class PolicyVerdict:
    decision: str
    rule: str  # "" when the queue's default decided
    version: int
    reason: str
    # require_approval: the deciding rule's time to decide (None: the default) and what
    # the request becomes when nobody decides in time.
    decide_within_ms: int | None = None
    on_timeout: str = "reject"
    error: str = ""  # the condition's error when the rule decided failing closed


def effect_policy_decide(
    *,
    item: WorkItem,
    lease: Lease,
    executor: Executor,
    kind: str,
    target: str,
    payload: Any,
    now_ms: int,
    policy_version: int | None = None,
) -> PolicyVerdict:
    """The answer for this proposal (at `policy_version` when the caller has read it, see
    clock_and_policy_version): the rules for every queue first, then the queue's own, which
    can only tighten them (leaseboard.domain.policy.decide_layered)."""
    policy = queue_policy(item.queue_id, policy_version)
    layered = decide_layered(
        policy.global_rules,
        policy.rule_set,
        kind=kind,
        target=target,
        activation=lambda: bounded_activation(
            _facts(
                policy,
                kind=kind,
                target=target,
                payload=payload,
                item=item,
                lease=lease,
                executor=executor,
                now_ms=now_ms,
            ).values,
            fact_limits(),
        ),
    )
    ruling = layered.ruling
    within, on_timeout = _approval_terms(policy, layered)
    return PolicyVerdict(
        ruling.decision,
        ruling.rule or "",
        policy.version,
        ruling.reason,
        decide_within_ms=within,
        # An approval asked because a condition failed never defaults to approve: the
        # agent chose the facts that made it fail.
        on_timeout=on_timeout if not ruling.error else "reject",
        error=ruling.error,
    )


def _spec_named(rule_set: RuleSet, name: str | None) -> RuleSpec | None:
    return next((r.spec for r in rule_set.rules if r.spec.name == name), None)


def _approval_terms(policy: QueuePolicy, layered: Layered) -> tuple[int | None, str]:
    """How long an approver has and what a request becomes when nobody decides: the
    binding rule's, and where both layers asked for approval, the stricter terms of the two
    (the shorter time; approve on timeout only if both say so)."""
    outer = layered.global_
    inner = layered.queue
    specs = []
    if outer.decision == PolicyDecision.REQUIRE_APPROVAL.value:
        specs.append(_spec_named(policy.global_rules, (outer.rule or "")[len(GLOBAL_PREFIX) :]))
    if inner is not None and inner.decision == PolicyDecision.REQUIRE_APPROVAL.value:
        specs.append(_spec_named(policy.rule_set, inner.rule))
    if layered.ruling.decision != PolicyDecision.REQUIRE_APPROVAL.value:
        return None, "reject"
    found = [spec for spec in specs if spec is not None]
    times = [spec.decide_within_ms for spec in found if spec.decide_within_ms is not None]
    approve = (
        bool(found)
        and len(found) == len(specs)
        and all(spec.on_timeout == "approve" for spec in found)
    )
    return (min(times) if times else None), ("approve" if approve else "reject")


@dataclass(frozen=True)
class Explanation:
    queue: str
    version: int
    ruling: Ruling  # the binding answer, with every rule's step (global ones "global:NAME")
    facts: dict[str, Any]
    rules: list[RuleSpec]
    default: str
    global_rules: list[RuleSpec] = field(default_factory=list)
    global_default: str = PolicyDecision.ALLOW.value
    global_version: int = 0


def _explained_where(queue_name: str | None, work_key: str | None) -> tuple[WorkItem | None, int]:
    """The work item an explanation is about (None: a queue alone) and its queue's id."""
    if work_key:
        item = WorkItem.objects.select_related("queue").filter(key=work_key).first()
        if item is None:
            raise NotFound(f"no work item {work_key!r}")
        if queue_name and item.queue.name != queue_name:
            raise ValidationFailed(f"{work_key!r} is in queue {item.queue.name!r}", param="queue")
        return item, item.queue_id
    if queue_name:
        found = Queue.objects.filter(name=queue_name).values_list("id", flat=True).first()
        if found is None:
            raise NotFound(f"no queue {queue_name!r}")
        return None, found
    raise ValidationFailed("name a queue or a work item", param="queue")


def policy_explain(
    *,
    kind: str,
    target: str,
    payload: Any = None,
    queue_name: str | None = None,
    work_key: str | None = None,
    executor: Executor | None = None,
) -> Explanation:
    """Which rule would decide this proposal now, and why, step by step. With a work item
    the evidence is that item's (its live lease, its latest checkpoint); with a queue
    alone there is no lease and no checkpoint. Records nothing."""
    effect_names_checked(kind, target)
    if payload is not None and not isinstance(payload, dict):
        raise ValidationFailed("payload is a JSON object", param="payload")
    item, queue_id = _explained_where(queue_name, work_key)
    lease = (
        Lease.objects.select_related("holder").filter(work_item=item, state__in=LIVE_STATES).first()
        if item
        else None
    )
    policy = queue_policy(queue_id)
    now = db_now_ms()
    facts = _facts(
        policy,
        kind=kind,
        target=target,
        payload=payload or {},
        item=item,
        lease=lease,
        executor=executor or (lease.holder if lease else None),
        now_ms=now,
        reads=policy.reads | {"evidence.has_checkpoint", "evidence.effects_authorized"},
    )
    layered = decide_layered(
        policy.global_rules,
        policy.rule_set,
        kind=kind,
        target=target,
        activation=lambda: bounded_activation(facts.values, fact_limits()),
        explain=True,
    )
    return Explanation(
        queue=policy.queue_name,
        version=policy.version,
        ruling=layered.ruling,
        facts=facts.shown(),
        rules=[r.spec for r in policy.rule_set.rules],
        default=policy.rule_set.default,
        global_rules=[r.spec for r in policy.global_rules.rules],
        global_default=policy.global_rules.default,
        global_version=policy.global_version,
    )
