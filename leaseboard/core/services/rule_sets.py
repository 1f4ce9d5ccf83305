"""Compiled rule sets, as the commit-time policy reads them: a queue's rules with the rules
for every queue, at the queue's policy version, compiled once per version per process. A
change to either raises the queue's version in its own transaction, so a version names one
rule set. Nothing here writes; leaseboard.core.services.policy decides with what it reads.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from django.db.models import Subquery

from leaseboard.core.clock import DbNowMs
from leaseboard.core.compiled import CompiledRead
from leaseboard.core.models import EffectRule, GlobalPolicy, Queue
from leaseboard.domain.errors import NotFound, ValidationFailed
from leaseboard.domain.policy import RuleSet, RuleSetInvalid, RuleSpec
from leaseboard.domain.policy import rule_set_compiled as compile_rules
from leaseboard.domain.reconciliation import PolicyDecision

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
    """A queue's compiled rules, and the rules for every queue tried before them, at the
    queue's policy version (which every change to either raises)."""

    queue_id: int
    queue_name: str
    version: int
    rule_set: RuleSet
    global_rules: RuleSet
    global_version: int = 0

    @property
    def reads(self) -> frozenset[str]:
        return self.rule_set.reads | self.global_rules.reads


_cache: dict[tuple[int, int], QueuePolicy] = {}
_global_cache: dict[tuple[str, tuple[RuleSpec, ...]], RuleSet] = {}
_cache_lock = threading.Lock()
CACHE_MAX = 1000


def policy_caches_forget() -> None:
    """Forget every compiled rule set (tests roll versions back; a process never needs to)."""
    with _cache_lock:
        _cache.clear()
        _global_cache.clear()


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


def _spec(r: tuple[Any, ...]) -> RuleSpec:
    return RuleSpec(
        name=r[0],
        kind=r[1],
        target=r[2],
        when=r[3],
        decision=r[4],
        note=r[5] or "",
        decide_within_ms=r[6],
        on_timeout=r[7] or "reject",
    )


def global_head() -> tuple[int, str]:
    """(version, default decision) of the rules for every queue; (0, allow) before any."""
    row = GlobalPolicy.objects.filter(id=1).values_list("version", "default_decision").first()
    return (int(row[0]), str(row[1])) if row else (0, PolicyDecision.ALLOW.value)


def global_rule_specs() -> list[RuleSpec]:
    rows = EffectRule.objects.filter(queue__isnull=True).order_by("position")
    return [_spec(r) for r in rows.values_list(*RULE_FIELDS)]


def _global_compiled(default: str, specs: list[RuleSpec]) -> RuleSet:
    key = (default, tuple(specs))
    hit = _global_cache.get(key)
    if hit is not None:
        return hit
    try:
        compiled = compile_rules(specs, default)
    except RuleSetInvalid as exc:
        raise ValidationFailed(f"the rules for every queue do not compile: {exc}") from None
    with _cache_lock:
        if len(_global_cache) >= CACHE_MAX:
            _global_cache.clear()
        _global_cache[key] = compiled
    return compiled


def queue_policy(queue_id: int, head: int | None = None) -> QueuePolicy:
    """The queue's compiled rule set at its current version, with the rules for every
    queue (one primary-key read when this process has compiled that version already; none
    when the caller has just read the version, `head`)."""
    if head is None:
        head = Queue.objects.filter(id=queue_id).values_list("policy_version", flat=True).first()
    if head is None:
        raise NotFound(f"no queue {queue_id}")
    hit = _cache.get((queue_id, head))
    if hit is not None:
        return hit
    for _ in range(10):
        # The rules for every queue, between two readings of their version: a change
        # raises it (and every queue's version) in its one transaction, so equal readings
        # mean these rules are the ones the queue's version below was made with.
        global_version, global_default = global_head()
        global_specs = global_rule_specs()
        # One statement (queue LEFT JOIN rules) so the version and the rules are one snapshot.
        rows = list(
            Queue.objects.filter(id=queue_id)
            .order_by("rules__position")
            .annotate(
                g=Subquery(GlobalPolicy.objects.filter(id=1).values("version")[:1]),
            )
            .values_list(
                "name",
                "policy_version",
                "default_decision",
                "g",
                *(f"rules__{f}" for f in RULE_FIELDS),
            )
        )
        if not rows:
            raise NotFound(f"no queue {queue_id}")
        if (rows[0][3] or 0) == global_version:
            break
    else:  # pragma: no cover - ten changes to the rules for every queue in a row
        raise ValidationFailed("the rules for every queue keep changing; try again")
    name, version, default = rows[0][:3]
    specs = [_spec(r[4:]) for r in rows if r[4] is not None]
    try:
        rule_set = compile_rules(specs, default)
    except RuleSetInvalid as exc:
        # Saved rules were validated; this is a rule the running CEL version refuses.
        raise ValidationFailed(f"queue {name!r}: its rules do not compile: {exc}") from None
    policy = QueuePolicy(
        queue_id,
        name,
        version,
        rule_set,
        _global_compiled(global_default, global_specs),
        global_version,
    )
    with _cache_lock:
        if len(_cache) >= CACHE_MAX:
            _cache.clear()
        _cache[(queue_id, version)] = policy
    return policy
