"""Commit-time policy: which of a queue's rules decides a proposed effect, and why.

`effect_policy_decide` is what the effect service asks (inside its transaction, after the
authority allowed the proposer); `policy_explain` answers the same question for a
hypothetical proposal without recording anything. Both read the rule set once per
(queue, policy_version) per process — a change raises the version in its own transaction
— and gather only the evidence the rules' conditions read. The rules themselves are
decided in leaseboard.domain.policy. Nothing here writes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from leaseboard.core.clock import DbNowMs, db_now_ms
from leaseboard.core.compiled import CompiledRead
from leaseboard.core.models import Checkpoint, Effect, Executor, Lease, Queue, WorkItem
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.domain.errors import NotFound, ValidationFailed
from leaseboard.domain.expressions import NO_CHECKPOINT_AGE_S, activation
from leaseboard.domain.policy import RuleSet, RuleSetInvalid, RuleSpec, Ruling, decide
from leaseboard.domain.policy import rule_set_compiled as compile_rules

RULE_FIELDS = (
    "name",
    "kind",
    "target",
    "condition",
    "decision",
    "note",
    "decide_within_ms",
    "on_timeout",
)


@dataclass(frozen=True)
class QueuePolicy:
    queue_id: int
    queue_name: str
    version: int
    rule_set: RuleSet


_cache: dict[tuple[int, int], QueuePolicy] = {}
_cache_lock = threading.Lock()
CACHE_MAX = 1000


# Compiled once per process (core.compiled): an effect authorization runs it every time.
_CLOCK_AND_VERSION = CompiledRead(
    lambda queue_id: Queue.objects.filter(id=queue_id).values_list(
        DbNowMs(), "policy_version", "name"
    ),
    (-9_000_000_002,),
    Queue,
)


def clock_and_policy_version(queue_id: int) -> tuple[int, int, str]:
    """The database clock, the queue's policy version and its name in one read (an
    effect's decision needs all three, after its lock): pass the version to
    `effect_policy_decide`; the name is what an agent's queue scope is asked about."""
    row = _CLOCK_AND_VERSION.values(queue_id)
    if row is None:
        raise NotFound(f"no queue {queue_id}")
    return int(row[0]), int(row[1]), str(row[2])


def queue_policy(queue_id: int, head: int | None = None) -> QueuePolicy:
    """The queue's compiled rule set at its current version (one primary-key read when
    this process has compiled that version already; none when the caller has just read
    the version, `head`)."""
    if head is None:
        head = Queue.objects.filter(id=queue_id).values_list("policy_version", flat=True).first()
    if head is None:
        raise NotFound(f"no queue {queue_id}")
    hit = _cache.get((queue_id, head))
    if hit is not None:
        return hit
    # One statement (queue LEFT JOIN rules) so the version and the rules are one snapshot.
    rows = list(
        Queue.objects.filter(id=queue_id)
        .order_by("rules__position")
        .values_list(
            "name",
            "policy_version",
            "default_decision",
            *(f"rules__{f}" for f in RULE_FIELDS),
        )
    )
    name, version, default = rows[0][:3]
    specs = [
        RuleSpec(
            name=r[3],
            kind=r[4],
            target=r[5],
            when=r[6],
            decision=r[7],
            note=r[8] or "",
            decide_within_ms=r[9],
            on_timeout=r[10] or "reject",
        )
        for r in rows
        if r[3] is not None
    ]
    try:
        rule_set = compile_rules(specs, default)
    except RuleSetInvalid as exc:
        # Saved rules were validated; this is a rule the running CEL version refuses.
        raise ValidationFailed(f"queue {name!r}: its rules do not compile: {exc}") from None
    policy = QueuePolicy(queue_id, name, version, rule_set)
    with _cache_lock:
        if len(_cache) >= CACHE_MAX:
            _cache.clear()
        _cache[(queue_id, version)] = policy
    return policy


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
    reads = policy.rule_set.reads if reads is None else reads
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
    """The queue's answer for this proposal: first matching rule, else its default (at
    `policy_version` when the caller has read it, see clock_and_policy_version)."""
    policy = queue_policy(item.queue_id, policy_version)
    ruling = decide(
        policy.rule_set,
        kind=kind,
        target=target,
        activation=lambda: activation(
            _facts(
                policy,
                kind=kind,
                target=target,
                payload=payload,
                item=item,
                lease=lease,
                executor=executor,
                now_ms=now_ms,
            ).values
        ),
    )
    spec = next((r.spec for r in policy.rule_set.rules if r.spec.name == ruling.rule), None)
    return PolicyVerdict(
        ruling.decision,
        ruling.rule or "",
        policy.version,
        ruling.reason,
        decide_within_ms=spec.decide_within_ms if spec else None,
        on_timeout=spec.on_timeout if spec else "reject",
    )


@dataclass(frozen=True)
class Explanation:
    queue: str
    version: int
    ruling: Ruling
    facts: dict[str, Any]
    rules: list[RuleSpec]
    default: str


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
    if not kind or len(kind) > 100:
        raise ValidationFailed("kind is 1 to 100 characters", param="kind")
    if not target or len(target) > 500:
        raise ValidationFailed("target is 1 to 500 characters", param="target")
    if payload is not None and not isinstance(payload, dict):
        raise ValidationFailed("payload is a JSON object", param="payload")
    item = None
    if work_key:
        item = WorkItem.objects.select_related("queue").filter(key=work_key).first()
        if item is None:
            raise NotFound(f"no work item {work_key!r}")
        if queue_name and item.queue.name != queue_name:
            raise ValidationFailed(f"{work_key!r} is in queue {item.queue.name!r}", param="queue")
        queue_id = item.queue_id
    elif queue_name:
        found = Queue.objects.filter(name=queue_name).values_list("id", flat=True).first()
        if found is None:
            raise NotFound(f"no queue {queue_name!r}")
        queue_id = found
    else:
        raise ValidationFailed("name a queue or a work item", param="queue")
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
        reads=policy.rule_set.reads | {"evidence.has_checkpoint", "evidence.effects_authorized"},
    )
    ruling = decide(
        policy.rule_set,
        kind=kind,
        target=target,
        activation=lambda: activation(facts.values),
        explain=True,
    )
    return Explanation(
        queue=policy.queue_name,
        version=policy.version,
        ruling=ruling,
        facts=facts.shown(),
        rules=[r.spec for r in policy.rule_set.rules],
        default=policy.rule_set.default,
    )
