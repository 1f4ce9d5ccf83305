"""Commit-time rules (docs/design.md §1, the third decision), decided without a database.

A queue has ordered rules. Each matches an effect's kind and target by glob (`*` is any run
of characters, `?` one character, everything else literal) and, optionally, a CEL
condition over the proposal and its evidence (leaseboard.domain.expressions). The first
rule that matches decides allow, deny or require_approval; when none does, the queue's
default decides.

A condition that cannot be decided for the facts at hand (the payload lacks the key, a
value has the wrong type, an integer overflows, the facts are past the limits, the runtime
stops on its iteration budget) fails closed: the rule decides, and a rule that allows asks
for an approver instead (Kubernetes' `failurePolicy: Fail`). The ruling carries the error,
so the effect records it and the explain view shows it; an error never lets an effect
through unseen, nor answers a 5xx.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from leaseboard.domain.expressions import (
    Condition,
    ConditionFailed,
    ExpressionError,
    compile_condition,
)
from leaseboard.domain.globs import Glob, glob_compiled, glob_match, glob_problem
from leaseboard.domain.reconciliation import KIND_MAX, TARGET_MAX, PolicyDecision

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,79}$")
MAX_RULES = 200
DECISIONS = tuple(d.value for d in PolicyDecision)
# What a require_approval rule's request becomes when nobody decides within its time.
TIMEOUT_DECISIONS = ("reject", "approve")
DECIDE_WITHIN_MAX_MS = 7 * 24 * 3600 * 1000
RESTRICTS = frozenset({PolicyDecision.DENY.value, PolicyDecision.REQUIRE_APPROVAL.value})


@dataclass(frozen=True)
class RuleSpec:
    """A rule as written (a form, a config file, a database row)."""

    name: str
    kind: str = "*"
    target: str = "*"
    when: str = ""  # a CEL condition; empty: always
    decision: str = PolicyDecision.ALLOW.value
    note: str = ""
    # require_approval only: decide within this long (None: the configured default), then
    # the request takes `on_timeout` (reject unless the rule says approve).
    decide_within_ms: int | None = None
    on_timeout: str = "reject"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "target": self.target}
        if self.when:
            out["when"] = self.when
        out["decision"] = self.decision
        if self.note:
            out["note"] = self.note
        if self.decide_within_ms is not None:
            out["decide_within_ms"] = self.decide_within_ms
        if self.on_timeout != "reject":
            out["on_timeout"] = self.on_timeout
        return out


@dataclass(frozen=True)
class FieldProblem:
    """One field of one rule (index in the list) that cannot be saved, and why."""

    index: int | None  # None: the rule set as a whole (the default decision)
    field: str
    message: str

    def __str__(self) -> str:
        where = f"rule {self.index + 1} " if self.index is not None else ""
        return f"{where}{self.field}: {self.message}"


class RuleSetInvalid(ValueError):
    def __init__(self, problems: list[FieldProblem]) -> None:
        super().__init__("; ".join(str(p) for p in problems))
        self.problems = problems


# -- globs (leaseboard.domain.globs: matched without backtracking) ----------------------


def covers(wide: str, narrow: str) -> bool:
    """Does every string `narrow` matches also match `wide`? Conservative: False when not
    sure (only used to find rules that can never match)."""
    if wide == narrow or (wide != "" and not wide.strip("*")):
        return True
    if not any(ch in narrow for ch in "*?"):
        return glob_match(wide, narrow)
    if wide.endswith("*") and not any(ch in wide[:-1] for ch in "*?"):
        return narrow.startswith(wide[:-1])
    return False


# -- compiling a rule set -----------------------------------------------------------------


@dataclass(frozen=True)
class CompiledRule:
    spec: RuleSpec
    kind: Glob
    target: Glob
    condition: Condition | None


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[CompiledRule, ...]
    default: str
    reads: frozenset[str] = field(default=frozenset())  # variables any condition reads


def _timeout_problems(i: int, spec: RuleSpec) -> list[FieldProblem]:
    out = []
    within = spec.decide_within_ms
    if within is not None and (
        not isinstance(within, int)
        or isinstance(within, bool)
        or not 1000 <= within <= DECIDE_WITHIN_MAX_MS
    ):
        out.append(FieldProblem(i, "decide_within_ms", "1000 ms to 7 days, in milliseconds"))
    if spec.on_timeout not in TIMEOUT_DECISIONS:
        out.append(FieldProblem(i, "on_timeout", "reject or approve"))
    asks = spec.decision == PolicyDecision.REQUIRE_APPROVAL.value
    if not asks and (within is not None or spec.on_timeout != "reject"):
        field = "decide_within_ms" if within is not None else "on_timeout"
        out.append(FieldProblem(i, field, "only a require_approval rule waits for a decision"))
    return out


def rule_set_compiled(specs: Sequence[RuleSpec], default: str) -> RuleSet:
    """Validate every rule (all problems at once, each naming its rule and field) and
    compile the set; raises RuleSetInvalid."""
    problems: list[FieldProblem] = []
    if default not in DECISIONS:
        problems.append(FieldProblem(None, "default", f"one of {', '.join(DECISIONS)}"))
    if len(specs) > MAX_RULES:
        problems.append(FieldProblem(None, "rules", f"at most {MAX_RULES} rules per queue"))
    seen: dict[str, int] = {}
    compiled: list[CompiledRule] = []
    for i, spec in enumerate(specs):
        if not NAME_RE.match(spec.name or ""):
            problems.append(
                FieldProblem(
                    i, "name", "1 to 80 of a-z 0-9 . _ - (starting with a letter or digit)"
                )
            )
        elif spec.name in seen:
            problems.append(FieldProblem(i, "name", f"rule {seen[spec.name] + 1} has this name"))
        else:
            seen[spec.name] = i
        if spec.decision not in DECISIONS:
            problems.append(FieldProblem(i, "decision", f"one of {', '.join(DECISIONS)}"))
        for name, value, longest in (
            ("kind", spec.kind, KIND_MAX),
            ("target", spec.target, TARGET_MAX),
        ):
            problem = glob_problem(value, what=name, longest=longest)
            if problem:
                problems.append(FieldProblem(i, name, problem))
        condition = None
        if spec.when.strip():
            try:
                condition = compile_condition(spec.when)
            except ExpressionError as exc:
                problems.append(FieldProblem(i, "when", str(exc)))
        if len(spec.note) > 500:
            problems.append(FieldProblem(i, "note", "at most 500 characters"))
        problems += _timeout_problems(i, spec)
        if not any(p.index == i for p in problems):
            compiled.append(
                CompiledRule(spec, glob_compiled(spec.kind), glob_compiled(spec.target), condition)
            )
    if not problems:
        problems += _shadowed(compiled)
    if problems:
        raise RuleSetInvalid(problems)
    reads = frozenset().union(*(r.condition.reads for r in compiled if r.condition))
    return RuleSet(tuple(compiled), default, reads)


def _shadowed(rules: Sequence[CompiledRule]) -> list[FieldProblem]:
    """A rule after an unconditional rule that takes all its effects can never match."""
    problems = []
    for j, later in enumerate(rules):
        for earlier in rules[:j]:
            if (
                earlier.condition is None
                and covers(earlier.spec.kind, later.spec.kind)
                and covers(earlier.spec.target, later.spec.target)
            ):
                problems.append(
                    FieldProblem(
                        j,
                        "kind",
                        f"matches nothing: rule {earlier.spec.name!r} comes first and "
                        f"takes every effect this rule could match (move this rule up)",
                    )
                )
                break
    return problems


# -- deciding ----------------------------------------------------------------------------


# deliberate: declared fields (frozen dataclasses, here and in Ruling, Layered), alike in
# shape only.
@dataclass(frozen=True)
class Step:
    """What one rule said about one proposal, for the explain view."""

    rule: str
    # matched | kind differs | target differs | condition false | failed closed | not reached
    outcome: str
    detail: str = ""


@dataclass(frozen=True)
class Ruling:
    decision: str
    rule: str | None  # the rule that decided; None: the queue's default
    reason: str
    steps: tuple[Step, ...] = ()
    error: str = ""  # the condition's evaluation error when the rule decided failing closed


def decide(
    rule_set: RuleSet,
    *,
    kind: str,
    target: str,
    activation: Callable[[], Any],
    explain: bool = False,
) -> Ruling:
    """First match wins. `activation()` builds the condition values; it is called at most
    once, and only if a rule's globs match and it has a condition."""
    steps: list[Step] = []
    built: list[Any] = []
    for rule in rule_set.rules:
        spec = rule.spec
        if not rule.kind.match(kind):
            if explain:
                steps.append(Step(spec.name, "kind differs", f"{kind!r} is not {spec.kind!r}"))
            continue
        if not rule.target.match(target):
            if explain:
                steps.append(
                    Step(spec.name, "target differs", f"{target!r} is not {spec.target!r}")
                )
            continue
        reason = f"rule {spec.name!r}: {spec.kind} on {spec.target}"
        if rule.condition is not None:
            try:
                if not built:
                    built.append(activation())
                holds = rule.condition.evaluate(built[0])
            except ConditionFailed as exc:
                return _failed_closed(spec, reason, str(exc), steps, rule_set, explain)
            if not holds:
                if explain:
                    steps.append(Step(spec.name, "condition false", spec.when))
                continue
            reason += f" where {spec.when}"
            if explain:
                steps.append(Step(spec.name, "matched", f"{spec.when} is true"))
        elif explain:
            steps.append(Step(spec.name, "matched", "no condition"))
        return _ruled(spec, reason, steps, rule_set, explain)
    return Ruling(
        rule_set.default,
        None,
        f"no rule matched: the queue's default is {rule_set.default}",
        tuple(steps),
    )


def _failed_closed(
    spec: RuleSpec, reason: str, error: str, steps: list[Step], rule_set: RuleSet, explain: bool
) -> Ruling:
    """The rule decides (an allowing rule asks for an approver instead) and says why."""
    decision = (
        spec.decision if spec.decision in RESTRICTS else PolicyDecision.REQUIRE_APPROVAL.value
    )
    why = f"the condition could not be decided ({error}); failed closed: {decision}"
    if explain:
        steps.append(Step(spec.name, "failed closed", why))
    reason += f" where {spec.when} ({why})"
    return _ruled(spec, reason, steps, rule_set, explain, decision=decision, error=error)


def _ruled(
    spec: RuleSpec,
    reason: str,
    steps: list[Step],
    rule_set: RuleSet,
    explain: bool,
    *,
    decision: str | None = None,
    error: str = "",
) -> Ruling:
    if explain:
        names = [r.spec.name for r in rule_set.rules]
        for later in names[names.index(spec.name) + 1 :]:
            steps.append(Step(later, "not reached"))
    decision = decision or spec.decision
    return Ruling(decision, spec.name, f"{reason} -> {decision}", tuple(steps), error=error)


# -- rules for every queue ----------------------------------------------------------------

GLOBAL_PREFIX = "global:"  # how a ruling names a rule of the rules for every queue
STRICTNESS = {
    PolicyDecision.ALLOW.value: 0,
    PolicyDecision.REQUIRE_APPROVAL.value: 1,
    PolicyDecision.DENY.value: 2,
}


@dataclass(frozen=True)
class Layered:
    """The two layers' answers and the one that binds. `queue` is None when the rules for
    every queue denied first (a queue cannot loosen a deny: its rules are not asked)."""

    ruling: Ruling
    global_: Ruling
    queue: Ruling | None
    by_global: bool  # the rules for every queue bound (their rule or default decided)


# deliberate: decide's keyword arguments again (it calls decide with them, once a layer);
# alike in shape only.
def decide_layered(
    global_set: RuleSet,
    queue_set: RuleSet,
    *,
    kind: str,
    target: str,
    activation: Callable[[], Any],
    explain: bool = False,
) -> Layered:
    """The rules for every queue first, then the queue's own, which can only tighten them:
    the stricter decision binds (allow < require_approval < deny); on a tie the global rule
    that matched binds (its name says "global:"); a global deny is final. The global
    default, usually allow, is a floor like any global decision."""
    built: list[Any] = []

    def once() -> Any:  # one activation for both layers
        if not built:
            built.append(activation())
        return built[0]

    outer = decide(global_set, kind=kind, target=target, activation=once, explain=explain)
    outer = Ruling(
        outer.decision,
        GLOBAL_PREFIX + outer.rule if outer.rule else None,
        (
            f"every queue's {outer.reason}"
            if outer.rule
            else f"no rule for every queue matched: their default is {global_set.default}"
        ),
        tuple(Step(GLOBAL_PREFIX + s.rule, s.outcome, s.detail) for s in outer.steps),
        error=outer.error,
    )
    if outer.decision == PolicyDecision.DENY.value:
        steps = outer.steps + tuple(Step(r.spec.name, "not reached") for r in queue_set.rules)
        binding = Ruling(
            outer.decision, outer.rule, outer.reason, steps if explain else (), error=outer.error
        )
        return Layered(binding, outer, None, True)
    inner = decide(queue_set, kind=kind, target=target, activation=once, explain=explain)
    steps = outer.steps + inner.steps if explain else ()
    stricter = STRICTNESS[outer.decision] > STRICTNESS[inner.decision]
    tie_on_a_global_rule = (
        STRICTNESS[outer.decision] == STRICTNESS[inner.decision]
        and outer.rule is not None
        and outer.decision in RESTRICTS
    )
    if stricter or tie_on_a_global_rule:
        reason = outer.reason
        if stricter:
            reason += f"; the queue's answer ({inner.decision}) cannot loosen it"
        binding = Ruling(outer.decision, outer.rule, reason, steps, error=outer.error)
        return Layered(binding, outer, inner, True)
    binding = Ruling(inner.decision, inner.rule, inner.reason, steps, error=inner.error)
    return Layered(binding, outer, inner, False)
