"""A queue's commit-time rule set: change it (every edit on the settings page, and
`config apply`, replaces the whole ordered set), and — with LEASEBOARD_POLICY_FOUR_EYES —
propose it for a second admin, who approves or rejects it.

A rule set is validated before anything is written (each problem under its rule and
field), applied by replacing the rows and raising `Queue.policy_version` in the same
transaction (effects record the version they were decided under), and audited with the
whole set before -> after."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from leaseboard.core.authority import Actor, authorize
from leaseboard.core.models import EffectRule, Queue
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import NotFound, TakeoverConflict, ValidationFailed
from leaseboard.domain.policy import RuleSetInvalid, RuleSpec, rule_set_compiled
from leaseboard.policy.models import PolicyChange
from leaseboard.policy.services.common import SettingsInvalid, audited


def rules_of(queue: Queue) -> list[RuleSpec]:
    return [r.spec() for r in EffectRule.objects.filter(queue=queue).order_by("position")]


def policy_snapshot(queue: Queue, rules: list[RuleSpec] | None = None) -> dict[str, Any]:
    rules = rules_of(queue) if rules is None else rules
    return {"default": queue.default_decision, "rules": [r.as_dict() for r in rules]}


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


def _replace_locked(queue: Queue, rules: list[RuleSpec], default: str) -> None:
    EffectRule.objects.filter(queue=queue).delete()
    EffectRule.objects.bulk_create(
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
    Queue.objects.filter(id=queue.id).update(
        default_decision=default, policy_version=F("policy_version") + 1
    )
    queue.refresh_from_db(fields=["default_decision", "policy_version"])


@dataclass(frozen=True)
class RuleSetChange:
    changed: bool  # False: the set was already this
    applied: bool  # False with changed: waiting for a second admin (`proposal`)
    proposal: PolicyChange | None = None
    version: int = 0


def rule_set_change_locked(
    *,
    queue_name: str,
    rules: list[RuleSpec],
    default: str,
    actor: Actor,
    summary: str = "",
    request_id: str = "",
) -> RuleSetChange:
    """Apply (or, under four-eyes, propose) a queue's new rule set, in the caller's
    transaction."""
    authorize(Act.CHANGE_RULE, actor)
    rule_set_checked(rules, default)
    queue = Queue.objects.select_for_update(no_key=True).filter(name=queue_name).first()
    if queue is None:
        raise NotFound(f"no queue {queue_name!r}")
    before = policy_snapshot(queue)
    after = policy_snapshot(queue, rules) | {"default": default}
    if before == after:
        return RuleSetChange(False, False, version=queue.policy_version)
    if settings.LEASEBOARD_POLICY_FOUR_EYES:
        pending = PolicyChange.objects.filter(queue=queue, status="pending").first()
        if pending is not None:
            raise ValidationFailed(
                f"change {pending.pk} to {queue_name!r} waits for a second admin: approve, "
                "reject or withdraw it first",
                param="rules",
            )
        try:
            with transaction.atomic():
                proposal = PolicyChange.objects.create(
                    queue=queue,
                    base_version=queue.policy_version,
                    rules=after["rules"],
                    default_decision=default,
                    summary=(summary or "rule set changed")[:300],
                    requested_by_id=actor.user_id,
                    requested_by_name=actor.name,
                )
        except IntegrityError:
            raise ValidationFailed("another change to these rules is waiting") from None
        audited(
            Act.CHANGE_RULE,
            actor,
            action="policy.change_proposed",
            object_type="queue",
            object_id=queue_name,
            before=before,
            after=after,
            reason=f"change {proposal.pk}: {proposal.summary}",
            request_id=request_id,
        )
        return RuleSetChange(True, False, proposal, queue.policy_version)
    _replace_locked(queue, rules, default)
    audited(
        Act.CHANGE_RULE,
        actor,
        action="policy.rules_change",
        object_type="queue",
        object_id=queue_name,
        before=before,
        after=after,
        reason=summary,
        request_id=request_id,
    )
    return RuleSetChange(True, True, version=queue.policy_version)


# The same change as its own outermost transaction (the queue page's form).
rule_set_change = transaction.atomic(durable=True)(rule_set_change_locked)


def _pending_locked(change_id: int) -> PolicyChange:
    change = (
        PolicyChange.objects.select_for_update(no_key=True, of=("self",))
        .select_related("queue")
        .filter(id=change_id)
        .first()
    )
    if change is None:
        raise NotFound(f"no policy change {change_id}")
    return change


def _decided(change: PolicyChange, status: str, actor: Actor, note: str) -> None:
    change.status = status
    change.decided_by = (
        get_user_model().objects.filter(pk=actor.user_id).first() if actor.user_id else None
    )
    change.decided_by_name = actor.name
    change.decided_at = timezone.now()
    change.note = note[:1000]
    change.save(update_fields=["status", "decided_by", "decided_by_name", "decided_at", "note"])


@transaction.atomic(durable=True)
def policy_change_approve(
    *, change_id: int, actor: Actor, note: str = "", request_id: str = ""
) -> PolicyChange:
    """A second admin applies a proposed rule set; never its proposer. Refused when the
    rules changed since the proposal (it was made against another version)."""
    change = _pending_locked(change_id)
    authorize(Act.APPROVE_POLICY_CHANGE, actor, requester_user_id=change.requested_by_id)
    if change.status != PolicyChange.Status.PENDING:
        raise ValidationFailed(f"change {change.pk} is {change.status}")
    queue = Queue.objects.select_for_update(no_key=True).get(id=change.queue_id)
    if queue.policy_version != change.base_version:
        raise TakeoverConflict(
            f"the rules of {queue.name!r} changed since change {change.pk} was proposed "
            f"(version {change.base_version}, now {queue.policy_version}): reject it and "
            "propose again"
        )
    rules = specs_from(change.rules)
    rule_set_checked(rules, change.default_decision)
    before = policy_snapshot(queue)
    _replace_locked(queue, rules, change.default_decision)
    _decided(change, PolicyChange.Status.APPLIED, actor, note)
    audited(
        Act.APPROVE_POLICY_CHANGE,
        actor,
        action="policy.change_approved",
        object_type="queue",
        object_id=queue.name,
        before=before,
        after=policy_snapshot(queue, rules),
        reason=f"change {change.pk} by {change.requested_by_name}: {change.summary}. {note}",
        request_id=request_id,
    )
    return change


@transaction.atomic(durable=True)
def policy_change_reject(
    *, change_id: int, actor: Actor, note: str = "", request_id: str = ""
) -> PolicyChange:
    """Another admin rejects a proposal, or its proposer withdraws it; nothing applies."""
    change = _pending_locked(change_id)
    mine = change.requested_by_id is not None and change.requested_by_id == actor.user_id
    authorize(Act.CHANGE_RULE if mine else Act.APPROVE_POLICY_CHANGE, actor)
    if change.status != PolicyChange.Status.PENDING:
        raise ValidationFailed(f"change {change.pk} is {change.status}")
    status = PolicyChange.Status.WITHDRAWN if mine else PolicyChange.Status.REJECTED
    _decided(change, status, actor, note)
    audited(
        Act.CHANGE_RULE if mine else Act.APPROVE_POLICY_CHANGE,
        actor,
        action=f"policy.change_{status}",
        object_type="queue",
        object_id=change.queue.name,
        before={"change": change.pk, "status": "pending"},
        after={"change": change.pk, "status": status},
        reason=note,
        request_id=request_id,
    )
    return change
