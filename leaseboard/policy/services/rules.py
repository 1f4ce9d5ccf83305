"""A rule set — a queue's, or the rules for every queue (tried first; a queue's can only
tighten them) — changed: every edit on the settings page, and `config apply`, replaces the
whole ordered set; with four-eyes on it is proposed for a second admin instead
(leaseboard.policy.services.changes decides proposals).

A rule set is validated before anything is written (each problem under its rule and
field), applied by replacing the rows and raising `Queue.policy_version` in the same
transaction (effects record the version they were decided under), and audited with the
whole set before -> after."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F

from leaseboard.core.authority import Actor, authorize
from leaseboard.core.models import Effect, EffectRule, GlobalPolicy, Queue, WorkItem
from leaseboard.core.services.rule_sets import global_head, global_rule_specs
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import NotFound, TakeoverConflict, ValidationFailed
from leaseboard.domain.globs import glob_match
from leaseboard.domain.policy import RuleSetInvalid, RuleSpec, rule_set_compiled
from leaseboard.policy.models import PolicyChange
from leaseboard.policy.services.common import SettingsInvalid, audited
from leaseboard.policy.services.four_eyes import four_eyes_on_locked

GLOBAL_NAME = "every queue"  # the rules for every queue, as the audit log names them


def rules_of(queue: Queue | None) -> list[RuleSpec]:
    """A queue's rules in order, or (None) the rules for every queue."""
    if queue is None:
        return global_rule_specs()
    return [r.spec() for r in EffectRule.objects.filter(queue=queue).order_by("position")]


def policy_snapshot(queue: Queue | None, rules: list[RuleSpec] | None = None) -> dict[str, Any]:
    rules = rules_of(queue) if rules is None else rules
    default = queue.default_decision if queue is not None else global_head()[1]
    return {"default": default, "rules": [r.as_dict() for r in rules]}


def specs_from(raw: list[dict[str, Any]]) -> list[RuleSpec]:
    """Rules from dicts (a config file, a stored proposal); unknown keys are field errors."""
    errors: dict[str, str] = {}
    specs = []
    known = {"name", "kind", "target", "when", "decision", "note", "on_timeout"}
    numbers = {"decide_within_ms"}
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            errors[f"rules[{i}]"] = "a table {name, kind, target, when, decision, note}"
            continue
        for key in sorted(set(item) - known - numbers):
            errors[f"rules[{i}].{key}"] = f"unknown field; a rule has {', '.join(sorted(known))}"
        bad = [k for k in known if k in item and not isinstance(item[k], str)]
        for key in bad:
            errors[f"rules[{i}].{key}"] = "a string"
        for key in numbers & set(item):
            if not isinstance(item[key], int) or isinstance(item[key], bool):
                errors[f"rules[{i}].{key}"] = "a whole number"
        if not errors:
            specs.append(RuleSpec(**{k: item[k] for k in known | numbers if k in item}))
    if errors:
        raise SettingsInvalid(errors)
    return specs


def rule_set_checked(rules: list[RuleSpec], default: str) -> None:
    """SettingsInvalid naming rule and field (`rules[0].when`) for every problem."""
    try:
        rule_set_compiled(rules, default)
    except RuleSetInvalid as exc:
        raise SettingsInvalid(
            {
                (f"rules[{p.index}].{p.field}" if p.index is not None else p.field): p.message
                for p in exc.problems
            }
        ) from None


def _global_locked() -> GlobalPolicy:
    """The one row of the rules for every queue, locked: their changes are serialized."""
    GlobalPolicy.objects.get_or_create(id=1)  # a truncated table (tests)
    return GlobalPolicy.objects.select_for_update(no_key=True).get(id=1)


def _replace_locked(queue: Queue | None, rules: list[RuleSpec], default: str) -> int:
    """Replace a rule set; the version it is now (the queue's, or every queue's for the
    rules for every queue: each queue's version raised too, as its effects' rules moved)."""
    EffectRule.objects.filter(**({"queue": queue} if queue else {"queue__isnull": True})).delete()
    EffectRule.objects.bulk_create(
        # deliberate: the EffectRule row named field by field from its RuleSpec.
        EffectRule(
            queue=queue,
            position=i,
            name=r.name,
            kind=r.kind,
            target=r.target,
            condition=r.when,
            decision=r.decision,
            note=r.note,
            decide_within_ms=r.decide_within_ms,
            on_timeout=r.on_timeout,
        )
        for i, r in enumerate(rules, 1)
    )
    if queue is None:
        GlobalPolicy.objects.filter(id=1).update(default_decision=default, version=F("version") + 1)
        Queue.objects.update(policy_version=F("policy_version") + 1)
        return global_head()[0]
    Queue.objects.filter(id=queue.id).update(
        default_decision=default, policy_version=F("policy_version") + 1
    )
    queue.refresh_from_db(fields=["default_decision", "policy_version"])
    return queue.policy_version


def scope_name(queue_name: str | None) -> str:
    """How the audit log and messages name a rule set."""
    return queue_name if queue_name is not None else GLOBAL_NAME


@dataclass(frozen=True)
class RuleSetChange:
    changed: bool  # False: the set was already this
    applied: bool  # False with changed: waiting for a second admin (`proposal`)
    proposal: PolicyChange | None = None
    version: int = 0


def rule_set_change_locked(
    *,
    queue_name: str | None,
    rules: list[RuleSpec],
    default: str,
    actor: Actor,
    summary: str = "",
    request_id: str = "",
) -> RuleSetChange:
    """Apply (or, under four-eyes, propose) a queue's new rule set, or (`queue_name` None)
    the rules for every queue, in the caller's transaction."""
    authorize(Act.CHANGE_RULE, actor)
    rule_set_checked(rules, default)
    queue, base = _rule_set_locked(queue_name)
    before = policy_snapshot(queue)
    after = policy_snapshot(queue, rules) | {"default": default}
    if before == after:
        return RuleSetChange(False, False, version=base)
    where = scope_name(queue_name)
    if four_eyes_on_locked():
        proposal = _rule_set_proposed_locked(
            queue, where=where, base=base, after=after, actor=actor, summary=summary
        )
        audited(
            Act.CHANGE_RULE,
            actor,
            action="policy.change_proposed",
            object_type="queue",
            object_id=where,
            before=before,
            after=after,
            reason=f"change {proposal.pk}: {proposal.summary}",
            request_id=request_id,
        )
        return RuleSetChange(True, False, proposal, base)
    version = _replace_locked(queue, rules, default)
    audited(
        Act.CHANGE_RULE,
        actor,
        action="policy.rules_change",
        object_type="queue",
        object_id=where,
        before=before,
        after=after,
        reason=summary,
        request_id=request_id,
    )
    return RuleSetChange(True, True, version=version)


def _rule_set_locked(queue_name: str | None) -> tuple[Queue | None, int]:
    """The queue under a row lock (None: the rules for every queue, their row locked) and
    the policy version a change starts from."""
    if queue_name is None:
        return None, _global_locked().version
    queue = Queue.objects.select_for_update(no_key=True).filter(name=queue_name).first()
    if queue is None:
        raise NotFound(f"no queue {queue_name!r}")
    return queue, queue.policy_version


def _rule_set_proposed_locked(
    queue: Queue | None, *, where: str, base: int, after: dict[str, Any], actor: Actor, summary: str
) -> PolicyChange:
    """Under four-eyes: the change waits for a second admin; one waiting change a scope."""
    pending = PolicyChange.objects.filter(
        kind=PolicyChange.Kind.RULES, queue=queue, status="pending"
    ).first()
    if pending is not None:
        raise ValidationFailed(
            f"change {pending.pk} to {where!r} waits for a second admin: approve, "
            "reject or withdraw it first",
            param="rules",
        )
    try:
        with transaction.atomic():
            return PolicyChange.objects.create(
                kind=PolicyChange.Kind.RULES,
                queue=queue,
                base_version=base,
                rules=after["rules"],
                default_decision=after["default"],
                summary=(summary or "rule set changed")[:300],
                requested_by_id=actor.user_id,
                requested_by_name=actor.name,
            )
    except IntegrityError:
        raise ValidationFailed("another change to these rules is waiting") from None


# The same change as its own outermost transaction (the queue page's form).
rule_set_change = transaction.atomic(durable=True)(rule_set_change_locked)


def rule_change_apply_locked(
    change: PolicyChange, actor: Actor, note: str, request_id: str
) -> None:
    """A second admin applies a proposed rule set. Refused when the rules changed since the
    proposal (it was made against another version; a change to the rules for every queue
    moves every queue's version)."""
    queue: Queue | None = None
    if change.queue_id is None:
        current = _global_locked().version
    else:
        queue = Queue.objects.select_for_update(no_key=True).get(id=change.queue_id)
        current = queue.policy_version
    where = scope_name(queue.name if queue else None)
    if current != change.base_version:
        raise TakeoverConflict(
            f"the rules of {where!r} changed since change {change.pk} was proposed "
            f"(version {change.base_version}, now {current}): reject it and propose again"
        )
    rules = specs_from(change.rules)
    rule_set_checked(rules, change.default_decision)
    before = policy_snapshot(queue)
    _replace_locked(queue, rules, change.default_decision)
    audited(
        Act.APPROVE_POLICY_CHANGE,
        actor,
        action="policy.change_approved",
        object_type="queue",
        object_id=where,
        before=before,
        after=policy_snapshot(queue, rules) | {"default": change.default_decision},
        reason=f"change {change.pk} by {change.requested_by_name}: {change.summary}. {note}",
        request_id=request_id,
    )


# -- payload fields a condition names, against what recent effects carried ----------------

RECENT_ITEMS = 50  # the queue's newest work items whose effects are looked at
RECENT_EFFECTS = 1000
# A string literal (skipped: `'payload.x'` names no field), or a payload field reference.
_PAYLOAD_FIELD = re.compile(
    r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
    r"|(?<![\w.])payload(?:\.([A-Za-z_][A-Za-z0-9_]*)|\[\s*(?:'([^']*)'|\"([^\"]*)\")\s*\])"
)


def payload_fields(when: str) -> list[str]:
    """The top-level payload fields a condition names (`payload.amount`, `payload['a-b']`)."""
    found = [
        next(g for g in m.groups() if g is not None)
        for m in _PAYLOAD_FIELD.finditer(when)
        if any(g is not None for g in m.groups())
    ]
    return list(dict.fromkeys(found))


def _recent_effects(queue_name: str | None) -> list[tuple[str, str, Any]]:
    """(kind, target, payload) of the effects of the newest work items (one queue's, or
    every queue's): bounded reads through the work items' index, never a scan of effects."""
    items = WorkItem.objects.order_by("-id")
    if queue_name is not None:
        items = items.filter(queue__name=queue_name)
    ids = list(items.values_list("id", flat=True)[:RECENT_ITEMS])
    rows = Effect.objects.filter(work_item_id__in=ids).values_list("kind", "target", "payload")
    return list(rows[:RECENT_EFFECTS])


def payload_field_warnings(rules: list[RuleSpec], queue_name: str | None) -> dict[str, str]:
    """For each rule whose `when` names a payload field that none of the recent effects it
    matches carried (`payload.amount` where refunds have `amount_cents`): a warning under
    `rules[i].when`. A warning, never a refusal: the field may be new; but a misspelt one
    makes the condition undecidable, and the rule then fails closed for every effect."""
    wanted = {i: payload_fields(r.when) for i, r in enumerate(rules) if r.when}
    if not any(wanted.values()):
        return {}
    recent = _recent_effects(queue_name)
    warnings: dict[str, str] = {}
    for i, names in wanted.items():
        rule = rules[i]
        matched = [
            p
            for kind, target, p in recent
            if glob_match(rule.kind, kind) and glob_match(rule.target, target)
        ]
        if not matched:
            continue  # nothing seen to compare with
        seen = {str(k) for p in matched if isinstance(p, dict) for k in p}
        missing = [n for n in names if n not in seen]
        if missing:
            fields = ", ".join(f"payload.{n}" for n in missing)
            has = ", ".join(sorted(seen)[:8]) or "no fields"
            close = difflib.get_close_matches(missing[0], seen, n=1, cutoff=0.5)
            hint = f" Did you mean payload.{close[0]}?" if close else ""
            warnings[f"rules[{i}].when"] = (
                f"{fields}: in none of the {len(matched)} recent {rule.kind} effects "
                f"(their payloads have {has}). If it is misspelt, `has()` of it is false and "
                f"any other use cannot be decided, so the rule fails closed.{hint}"
            )
    return warnings
