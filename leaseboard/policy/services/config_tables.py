"""Planning a configuration's tables (leaseboard/policy/services/config.py): the plan and
its changes, and the checks of the `[queues.NAME]` tables and of `[global]` (the rules for
every queue), each problem under its path in the document. Reads, never writes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from leaseboard.core.models import Queue
from leaseboard.policy.services import queues, rules
from leaseboard.policy.services.common import SettingsInvalid

QUEUE_KEYS = (
    "capacity",
    "overflow",
    "reconciliation_gate",
    "timing",
    "envelope",
    "notify",
    "default_decision",
    "rules",
)
ENVELOPE_KEYS = ("scopes", "leases_per_agent", "windows")


@dataclass
class Change:
    what: str  # "queue payments", "rules of payments", "person ada"
    action: str  # create | update
    before: Any
    after: Any

    def lines(self) -> list[str]:
        if self.action == "create":
            return [f"+ {self.what}: {_short(self.after)}"]
        out = [f"~ {self.what}:"]
        before, after = self.before or {}, self.after or {}
        if isinstance(before, dict) and isinstance(after, dict):
            for key in sorted(set(before) | set(after), key=str):
                if before.get(key) != after.get(key):
                    out.append(f"    {key}: {_short(before.get(key))} -> {_short(after.get(key))}")
        return out


def _short(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


@dataclass
class QueuePlan:
    name: str
    exists: bool
    values: dict[str, Any]
    notify: dict[str, Any] | None
    rules: list[Any]
    default: str


@dataclass
class Plan:
    queues: list[QueuePlan] = field(default_factory=list)
    people: dict[str, tuple[list[str], dict[str, list[str]], bool]] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)
    untouched: list[str] = field(default_factory=list)
    global_rules: tuple[list[Any], str] | None = None  # ([RuleSpec], default) if in the file
    four_eyes: bool | None = None  # None: not in the file
    sso: dict[str, Any] | None = None  # the `[sso]` table, checked; None: not in the file
    effect_kinds: list[Any] | None = None  # [DisplayHint] if `[effect_kinds]` is in the file
    # Not refusals: a rule's `when` naming payload fields no recent effect of its kind had.
    warnings: dict[str, str] = field(default_factory=dict)

    def text(self) -> str:
        lines = [line for c in self.changes for line in c.lines()] or ["no changes"]
        lines += [f"warning: {path}: {message}" for path, message in self.warnings.items()]
        return "\n".join(lines)


def prefixed(errors: dict[str, str], prefix: str) -> dict[str, str]:
    return {f"{prefix}.{k}": v for k, v in errors.items()}


def plan_queue(
    name: str, qdoc: Any, queue: Queue | None, plan: Plan, errors: dict[str, str]
) -> None:
    """One `[queues.NAME]` table: its problems under `queues.NAME`, or its plan and changes."""
    path = f"queues.{name}"
    if not isinstance(qdoc, dict):
        errors[path] = "a table of settings"
        return
    problem = queues.queue_name_problem(name)
    if problem:
        errors[path] = problem
        return
    values = _queue_values_checked(path, qdoc, errors)
    notify = _queue_notify_checked(path, qdoc, queue, errors)
    checked = _rules_checked(qdoc, path=path, shown="queues.NAME", errors=errors)
    if checked is None or any(k == path or k.startswith(path + ".") for k in errors):
        return
    specs, default = checked
    plan.warnings.update(prefixed(rules.payload_field_warnings(specs, name), path))
    plan.queues.append(QueuePlan(name, queue is not None, values, notify, specs, default))
    plan.changes.extend(_queue_changes(name, queue, values, notify, specs, default))


def _queue_values_checked(
    path: str, qdoc: dict[str, Any], errors: dict[str, str]
) -> dict[str, Any]:
    """The queue's settings and envelope, checked as the settings page checks them."""
    for key in sorted(set(qdoc) - set(QUEUE_KEYS)):
        errors[f"{path}.{key}"] = f"unknown field; a queue has {', '.join(QUEUE_KEYS)}"
    envelope = qdoc.get("envelope") or {}
    if not isinstance(envelope, dict):
        errors[f"{path}.envelope"] = "a table of scopes, leases_per_agent, windows"
        envelope = {}
    for key in sorted(set(envelope) - set(ENVELOPE_KEYS)):
        errors[f"{path}.envelope.{key}"] = (
            f"unknown field; an envelope has {', '.join(ENVELOPE_KEYS)}"
        )
    basics = ("capacity", "overflow", "reconciliation_gate", "timing")
    raw = {k: qdoc[k] for k in basics if k in qdoc}
    raw.update({k: envelope[k] for k in ENVELOPE_KEYS if k in envelope})
    try:
        return queues.queue_settings_checked(raw)
    except SettingsInvalid as exc:
        errors.update(
            prefixed(
                {
                    (f"envelope.{k}" if k.split(".")[0] in ENVELOPE_KEYS else k): v
                    for k, v in exc.errors.items()
                },
                path,
            )
        )
        return {}


def _queue_notify_checked(
    path: str, qdoc: dict[str, Any], queue: Queue | None, errors: dict[str, str]
) -> dict[str, Any] | None:
    """The notification targets (secrets kept from the queue as it is), or None if bad."""
    try:
        return queues.notify_checked(
            qdoc.get("notify") or {}, current=(queue.notify or {}) if queue else {}
        )
    except SettingsInvalid as exc:
        errors.update(
            prefixed(
                {k.removeprefix("notify."): v for k, v in exc.errors.items()}, f"{path}.notify"
            )
        )
        return None


def _rules_checked(
    table: dict[str, Any], *, path: str, shown: str, errors: dict[str, str]
) -> tuple[list[Any], str] | None:
    """A table's rules as RuleSpecs and its default decision, checked as one rule set (a
    queue's, or the rules for every queue); None, with the problems under `path`, if not."""
    default = str(table.get("default_decision", "allow"))
    raw_rules = table.get("rules") or []
    try:
        if not isinstance(raw_rules, list):
            raise SettingsInvalid({"rules": f"a list of rules ([[{shown}.rules]])"})
        specs = rules.specs_from(raw_rules)
        rules.rule_set_checked(specs, default)
    except SettingsInvalid as exc:
        errors.update(
            prefixed(
                {k.replace("default", "default_decision"): v for k, v in exc.errors.items()},
                path,
            )
        )
        return None
    return specs, default


def _queue_changes(
    name: str,
    queue: Queue | None,
    values: dict[str, Any],
    notify: dict[str, Any] | None,
    specs: list[Any],
    default: str,
) -> list[Change]:
    """What applying a valid queue table would change, in the order `plan.text()` shows."""
    changes: list[Change] = []
    if queue is None:
        changes.append(Change(f"queue {name}", "create", None, values))
    else:
        before = queues.queue_snapshot(queue)
        if before != values:
            changes.append(Change(f"queue {name}", "update", before, values))
        if notify != (queue.notify or {}):
            changes.append(
                Change(
                    f"notify of {name}",
                    "update",
                    queues.notify_shown(queue.notify or {}),
                    queues.notify_shown(notify or {}),
                )
            )
    before_policy = rules.policy_snapshot(queue) if queue else {"default": "allow", "rules": []}
    after_policy = {"default": default, "rules": [s.as_dict() for s in specs]}
    if before_policy != after_policy:
        changes.append(
            Change(
                f"rules of {name}",
                "update",
                {"default": before_policy["default"], **by_name(before_policy["rules"])},
                {"default": after_policy["default"], **by_name(after_policy["rules"])},
            )
        )
    if queue is None and notify:
        changes.append(Change(f"notify of {name}", "create", None, queues.notify_shown(notify)))
    return changes


# deliberate: a table's plan opens as each does (absent: untouched; wrong type: noted).
def plan_global(doc: dict[str, Any], plan: Plan, errors: dict[str, str]) -> None:
    if "global" not in doc:
        return
    gdoc = doc["global"]
    if not isinstance(gdoc, dict):
        errors["global"] = "a table of default_decision, rules"
        return
    for key in sorted(set(gdoc) - {"default_decision", "rules"}):
        errors[f"global.{key}"] = (
            "unknown field; the rules for every queue have default_decision, rules"
        )
    checked = _rules_checked(gdoc, path="global", shown="global", errors=errors)
    if checked is None:
        return
    specs, default = checked
    plan.warnings.update(prefixed(rules.payload_field_warnings(specs, None), "global"))
    plan.global_rules = (specs, default)
    before = rules.policy_snapshot(None)
    after = {"default": default, "rules": [r.as_dict() for r in specs]}
    if before != after:
        plan.changes.append(
            Change(
                "rules for every queue",
                "update",
                {"default": before["default"], **by_name(before["rules"])},
                {"default": after["default"], **by_name(after["rules"])},
            )
        )


def by_name(rule_dicts: Any) -> dict[str, Any]:
    return {
        f"{i}. {r['name']}": {k: v for k, v in r.items() if k != "name"}
        for i, r in enumerate(rule_dicts, 1)
    }
