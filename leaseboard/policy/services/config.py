"""Configuration as code: queues (settings, envelope, notification targets, rules), the
rules for every queue (`[global]`), four-eyes and people's roles as one TOML document.

`config_export` reads the database into the document; `config_plan` validates a document
(every problem under its path, `queues.payments.rules[0].when`) and lists what would
change; `config_apply` makes those changes in one transaction through the same services
as the settings pages, each audited before -> after, plus one `config.apply` entry. Those
services obey four-eyes as the database has it (never a variable of the process running
`apply`): what they would propose on a page, the file proposes. A second apply of the same
file changes nothing and records nothing. Queues and people the
file does not name are left as they are; a file never holds secrets (webhook secrets stay
as they are, or come from `secret_env`) or passwords.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass, field
from typing import Any

import tomli_w
from django.contrib.auth import get_user_model
from django.db import transaction

from leaseboard.core.authority import Actor
from leaseboard.core.dbfaults import long_bounds
from leaseboard.core.models import Queue
from leaseboard.domain.authority import Act
from leaseboard.policy.models import PolicyChange
from leaseboard.policy.services import display_hints, four_eyes, people, queues, rules, sso_config
from leaseboard.policy.services.common import SettingsInvalid, audited
from leaseboard.policy.services.config_tables import (
    ENVELOPE_KEYS,
    Change,
    Plan,
    plan_global,
    plan_queue,
)
from leaseboard.policy.services.four_eyes import four_eyes_stored

FORMAT_VERSION = 1
BREAK_GLASS = people.BREAK_GLASS  # in a person's list beside the roles


# -- export ------------------------------------------------------------------------------


def _queue_doc(queue: Queue) -> dict[str, Any]:
    # Canonical order everywhere (PostgreSQL's jsonb does not keep the order keys came in).
    snap = queues.queue_settings_checked(queues.queue_snapshot(queue))
    snap["timing"] = {k: snap["timing"][k] for k in queues.TIMING_KEYS if k in snap["timing"]}
    snap["scopes"] = dict(sorted(snap["scopes"].items()))
    doc: dict[str, Any] = {}
    if snap["capacity"] is not None:
        doc["capacity"] = snap["capacity"]
    doc["overflow"] = snap["overflow"]
    doc["reconciliation_gate"] = snap["reconciliation_gate"]
    if snap["timing"]:
        doc["timing"] = snap["timing"]
    envelope = {k: snap[k] for k in ENVELOPE_KEYS if snap[k] not in (None, {}, [])}
    if envelope:
        doc["envelope"] = envelope
    shown = queues.notify_shown(queue.notify or {})
    notify = {k: shown[k] for k in ("webhooks", "emails", "kinds", "approvals") if shown.get(k)}
    if notify.get("webhooks"):
        notify["webhooks"] = [{"url": w["url"]} for w in notify["webhooks"]]
    if notify.get("approvals"):
        # Secrets are never exported: a hook applied back by URL keeps the secret it has.
        approvals = _hook_urls_only(notify["approvals"])
        if approvals.get("rules"):
            approvals["rules"] = {n: _hook_urls_only(e) for n, e in approvals["rules"].items()}
        notify["approvals"] = approvals
    if notify:
        doc["notify"] = notify
    policy = rules.policy_snapshot(queue)
    doc["default_decision"] = policy["default"]
    doc["rules"] = policy["rules"]
    return doc


def _global_doc() -> dict[str, Any]:
    policy = rules.policy_snapshot(None)
    return {"default_decision": policy["default"], "rules": policy["rules"]}


def config_export() -> dict[str, Any]:
    people_doc: dict[str, list[str]] = {}
    users = get_user_model().objects.order_by("username").prefetch_related("groups")
    for user in users:
        held = people.grants_listed(people.person_snapshot(user))
        if held:
            people_doc[user.get_username()] = held
    return {
        "version": FORMAT_VERSION,
        "four_eyes": four_eyes_stored(),
        "global": _global_doc(),
        "queues": {q.name: _queue_doc(q) for q in Queue.objects.order_by("name")},
        "people": people_doc,
        "sso": sso_config.sso_snapshot(),
        **({"effect_kinds": hints} if (hints := display_hints.display_hints_snapshot()) else {}),
    }


HEADER = """\
# Leaseboard configuration: four-eyes, the rules for every queue ([global], tried before each
# queue's own, which can only tighten them), queues, admission envelopes, rules, roles, and how
# pages show effect kinds' amounts ([effect_kinds."GLOB"]).
# Apply with `manage.py config apply FILE --dry-run` (shows the difference), then without
# --dry-run. Queues and people not named here are left as they are. No secrets: a webhook
# keeps its secret, or takes it from the environment with secret_env = "VAR".
"""


def config_dumps(doc: dict[str, Any]) -> str:
    return HEADER + "\n" + tomli_w.dumps(doc, multiline_strings=False)


def config_loads(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsInvalid({"file": f"not TOML: {exc}"}) from None


# -- plan --------------------------------------------------------------------------------


def config_plan(doc: dict[str, Any]) -> Plan:
    """Validate the whole document and list its changes; writes nothing."""
    errors: dict[str, str] = {}
    known = ("version", "four_eyes", "global", "queues", "people", "sso", "effect_kinds")
    for key in sorted(set(doc) - set(known)):
        errors[key] = f"unknown field; a configuration has {', '.join(known)}"
    if doc.get("version", FORMAT_VERSION) != FORMAT_VERSION:
        errors["version"] = f"this Leaseboard reads version {FORMAT_VERSION}"
    plan = Plan()
    _plan_four_eyes(doc, plan, errors)
    plan_global(doc, plan, errors)
    queue_docs = doc.get("queues") or {}
    if not isinstance(queue_docs, dict):
        errors["queues"] = "a table of queue name -> settings"
        queue_docs = {}
    existing = {q.name: q for q in Queue.objects.all()}
    plan.untouched = sorted(set(existing) - set(queue_docs))
    for name, qdoc in queue_docs.items():
        plan_queue(name, qdoc, existing.get(name), plan, errors)
    _plan_people(doc.get("people") or {}, plan, errors)
    if "sso" in doc:
        plan.sso = sso_config.sso_planned(doc["sso"], errors)
        if plan.sso is not None:
            before = sso_config.sso_snapshot()
            if before != plan.sso:
                plan.changes.append(Change("sso", "update", before, plan.sso))
    _plan_effect_kinds(doc, plan, errors)
    if errors:
        raise SettingsInvalid(errors)
    return plan


def _plan_effect_kinds(doc: dict[str, Any], plan: Plan, errors: dict[str, str]) -> None:
    """`[effect_kinds."GLOB"]`: the display hints, the whole set (absent: left as it is)."""
    if "effect_kinds" not in doc:
        return
    try:
        plan.effect_kinds = display_hints.display_hints_checked(doc["effect_kinds"])
    except SettingsInvalid as exc:
        errors.update({f"effect_kinds.{k}".rstrip("."): v for k, v in exc.errors.items()})
        return
    before = display_hints.display_hints_snapshot()
    after = {h.kind: h.as_dict() for h in plan.effect_kinds}
    if before != after:
        plan.changes.append(Change("effect kinds' display", "update", before, after))


# deliberate: a table's plan opens as each does (absent: untouched; wrong type: noted).
def _plan_four_eyes(doc: dict[str, Any], plan: Plan, errors: dict[str, str]) -> None:
    if "four_eyes" not in doc:
        return
    wanted = doc["four_eyes"]
    if not isinstance(wanted, bool):
        errors["four_eyes"] = "true or false"
        return
    plan.four_eyes = wanted
    now = four_eyes_stored()
    if wanted != now:
        plan.changes.append(Change("four-eyes", "update", {"on": now}, {"on": wanted}))


def _plan_people(people_doc: Any, plan: Plan, errors: dict[str, str]) -> None:
    if not isinstance(people_doc, dict):
        errors["people"] = "a table of username -> [roles]"
        return
    users = {
        u.get_username(): u for u in get_user_model().objects.filter(username__in=list(people_doc))
    }
    for username, held in people_doc.items():
        path = f"people.{username}"
        if username not in users:
            errors[path] = (
                "no such user: create people on the settings page or with "
                "`manage.py create_user` (a file holds no passwords)"
            )
            continue
        grants = people.grants_noted(held, errors, path)
        if grants is None:
            continue
        roles, scopes, break_glass = grants
        before = people.person_snapshot(users[username])
        after = {**before, "roles": roles, "break_glass": break_glass}
        after.pop("scopes", None)
        if scopes:
            after["scopes"] = scopes
        if before != after:  # only people whose roles change are touched at all
            plan.people[username] = (roles, scopes, break_glass)
            plan.changes.append(Change(f"person {username}", "update", before, after))


# -- apply -------------------------------------------------------------------------------


@dataclass
class Applied:
    plan: Plan
    # Changes waiting for a second admin (four-eyes): (change id, what it is about).
    proposals: list[tuple[int, str]] = field(default_factory=list)

    def waiting(self, proposal: PolicyChange | None) -> None:
        if proposal is not None:
            self.proposals.append((proposal.pk, proposal.what))


@transaction.atomic(durable=True)
def config_apply(
    doc: dict[str, Any], *, actor: Actor, dry_run: bool = False, source: str = ""
) -> Applied:
    """Apply the document in one transaction (nothing at all if any part is refused), under
    the long statement and lock bounds (a large document is no hot path)."""
    long_bounds()
    plan = config_plan(doc)
    applied = Applied(plan)
    if dry_run or not plan.changes:
        return applied
    if plan.four_eyes is True:  # on first: the rest of the file is then decided under it
        four_eyes.four_eyes_change_locked(on=True, actor=actor, note="config apply")
    _apply_rules_and_queues_locked(plan, applied, actor)
    if plan.sso is not None and plan.sso != sso_config.sso_snapshot():
        # Before the people: a fresh database needs no people, the groups say who is who.
        sso_config.sso_apply_locked(plan.sso, actor=actor)
    _apply_people_locked(plan, applied, actor)
    if plan.effect_kinds is not None:
        display_hints.display_hints_replace_locked(plan.effect_kinds, actor=actor)
    if plan.four_eyes is False:  # off last, and only ever as a proposal
        applied.waiting(
            four_eyes.four_eyes_change_locked(on=False, actor=actor, note="config apply").proposal
        )
    _audit_apply(doc, plan, actor, source)
    return applied


def _apply_rules_and_queues_locked(plan: Plan, applied: Applied, actor: Actor) -> None:
    """The rules for every queue, then each queue's settings, notify targets and rules."""
    if plan.global_rules is not None:
        specs, default = plan.global_rules
        change = rules.rule_set_change_locked(
            queue_name=None, rules=specs, default=default, actor=actor, summary="config apply"
        )
        applied.waiting(change.proposal)
    for q in plan.queues:
        queues.queue_save_locked(name=q.name, values=q.values, actor=actor, create=not q.exists)
        if q.notify is not None:
            queues.queue_notify_save_locked(name=q.name, notify=q.notify, actor=actor)
        change = rules.rule_set_change_locked(
            queue_name=q.name, rules=q.rules, default=q.default, actor=actor, summary="config apply"
        )
        applied.waiting(change.proposal)


def _apply_people_locked(plan: Plan, applied: Applied, actor: Actor) -> None:
    """Each person whose roles change (four-eyes may make a grant a proposal)."""
    for username, (roles, scopes, break_glass) in plan.people.items():
        user = get_user_model().objects.get(username=username)
        # deliberate: keyword arguments named one a line; alike in shape only, the values differ.
        person = people.person_update_locked(
            username=username,
            roles=roles,
            scopes=scopes,
            break_glass=break_glass,
            active=user.is_active,
            actor=actor,
        )
        applied.waiting(person.proposal)


def _audit_apply(doc: dict[str, Any], plan: Plan, actor: Actor, source: str) -> None:
    """One `config.apply` entry beside the per-change ones: what changed, the file's digest."""
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()
    audited(
        Act.CONFIGURE_QUEUE,
        actor,
        action="config.apply",
        object_type="config",
        object_id=digest[:16],
        before=None,
        after={"changes": [c.what for c in plan.changes], "sha256": digest},
        reason=source,
    )


def config_apply_text(
    text: str, *, actor: Actor, dry_run: bool = False, source: str = ""
) -> Applied:
    return config_apply(config_loads(text), actor=actor, dry_run=dry_run, source=source)


def _hook_urls_only(entry: dict[str, Any]) -> dict[str, Any]:
    out = dict(entry)
    if out.get("webhooks"):
        out["webhooks"] = [{"url": w["url"]} for w in out["webhooks"]]
    return out
