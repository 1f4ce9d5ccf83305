"""Queues: settings (capacity, overflow, lease timing, reconciliation gate), admission
envelope (scopes, leases per agent, time windows) and notification targets.

Settings arrive complete (a form posts every field; a config file's missing fields mean
the defaults) and are checked all at once, each problem under its field's name."""

from __future__ import annotations

import os
import re
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import EmailValidator, URLValidator
from django.db import transaction

from leaseboard.core.authority import Actor, authorize
from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Queue
from leaseboard.core.services.work import work_admit_waiting_locked
from leaseboard.domain.authority import Act
from leaseboard.domain.envelopes import (
    EnvelopeInvalid,
    leases_per_agent_checked,
    scopes_checked,
    windows_as_dict,
    windows_checked,
)
from leaseboard.domain.errors import NotFound
from leaseboard.domain.targets import email_problem, webhook_url_problem
from leaseboard.domain.timing import TimingPolicyError
from leaseboard.domain.vocabulary import AlertKind
from leaseboard.policy.services.common import SettingsInvalid, audited

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,99}$")
TIMING_KEYS = ("ttl_ms", "renew_after_ms", "jeopardy_after_ms", "lock_delay_ms", "max_lifetime_ms")
DEFAULTS: dict[str, Any] = {
    "capacity": None,
    "overflow": "wait",
    "timing": {},
    "reconciliation_gate": True,
    "scopes": {},
    "leases_per_agent": None,
    "windows": {},
}
FIELDS = tuple(DEFAULTS)


def queue_name_problem(name: str) -> str | None:
    if not NAME_RE.match(name or ""):
        return "1 to 100 of a-z 0-9 _ - (starting with a letter or digit)"
    return None


def _whole(value: Any, *, minimum: int, field: str, errors: dict[str, str]) -> int | None:
    if value in (None, ""):
        return None
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        errors[field] = f"a whole number of at least {minimum}, or empty"
        return None
    return value


def queue_settings_checked(raw: dict[str, Any]) -> dict[str, Any]:
    """Normalized settings; SettingsInvalid names every bad field (timing by the domain's
    own rules: ttl >= 3 x renew interval, jeopardy before the ttl, ...)."""
    errors: dict[str, str] = {}
    for key in sorted(set(raw) - set(FIELDS)):
        errors[key] = f"unknown field; a queue has {', '.join(FIELDS)}"
    out = {**DEFAULTS, **{k: v for k, v in raw.items() if k in FIELDS}}
    out["capacity"] = _whole(out["capacity"], minimum=0, field="capacity", errors=errors)
    if out["overflow"] not in ("wait", "reject"):
        errors["overflow"] = "wait or reject"
    timing = out["timing"] or {}
    if not isinstance(timing, dict):
        errors["timing"] = f"a table of {', '.join(TIMING_KEYS)}"
        timing = {}
    clean: dict[str, int] = {}
    for key, value in timing.items():
        if key not in TIMING_KEYS:
            errors[f"timing.{key}"] = f"unknown field; timing has {', '.join(TIMING_KEYS)}"
            continue
        number = _whole(value, minimum=0, field=f"timing.{key}", errors=errors)
        if number is not None:
            clean[key] = number
    if not any(k.startswith("timing") for k in errors):
        try:
            settings.LEASE_DEFAULTS.with_overrides(clean)
        except TimingPolicyError as exc:
            errors[f"timing.{exc.param}"] = str(exc).split(": ", 1)[-1]
    out["timing"] = clean
    if not isinstance(out["reconciliation_gate"], bool):
        errors["reconciliation_gate"] = "true or false"
    for key, check in (("scopes", scopes_checked), ("leases_per_agent", leases_per_agent_checked)):
        try:
            out[key] = check(out[key])
        except EnvelopeInvalid as exc:
            errors[exc.param] = exc.message
    try:
        out["windows"] = windows_as_dict(windows_checked(out["windows"]))
    except EnvelopeInvalid as exc:
        errors[exc.param] = exc.message
    if errors:
        raise SettingsInvalid(errors)
    return out


def queue_snapshot(queue: Queue) -> dict[str, Any]:
    """The queue's settings in the shape queue_settings_checked returns."""
    return {
        "capacity": queue.capacity,
        "overflow": queue.overflow,
        "timing": dict(queue.timing or {}),
        "reconciliation_gate": queue.agent_acquire_needs_reconciliation,
        "scopes": dict(queue.admits_scopes or {}),
        "leases_per_agent": queue.leases_per_agent,
        "windows": dict(queue.windows or {}),
    }


def _assign(queue: Queue, checked: dict[str, Any]) -> None:
    queue.capacity = checked["capacity"]
    queue.overflow = checked["overflow"]
    queue.timing = checked["timing"]
    queue.agent_acquire_needs_reconciliation = checked["reconciliation_gate"]
    queue.admits_scopes = checked["scopes"]
    queue.leases_per_agent = checked["leases_per_agent"]
    queue.windows = checked["windows"]


def queue_save_locked(
    *, name: str, values: dict[str, Any], actor: Actor, create: bool, request_id: str = ""
) -> tuple[Queue, bool]:
    """Create or change a queue inside the caller's transaction; (queue, changed)."""
    authorize(Act.CONFIGURE_QUEUE, actor)
    problem = queue_name_problem(name)
    if problem:
        raise SettingsInvalid({"name": problem})
    checked = queue_settings_checked(values)
    queue = Queue.objects.select_for_update(no_key=True).filter(name=name).first()
    if create and queue is not None:
        raise SettingsInvalid({"name": f"a queue named {name!r} exists"})
    if not create and queue is None:
        raise NotFound(f"no queue {name!r}")
    before = None if queue is None else queue_snapshot(queue)
    if before == checked:
        return queue, False  # type: ignore[return-value]
    queue = queue or Queue(name=name)
    _assign(queue, checked)
    queue.save()
    audited(
        Act.CONFIGURE_QUEUE,
        actor,
        action="queue.create" if before is None else "queue.update",
        object_type="queue",
        object_id=name,
        before=before,
        after=checked,
        request_id=request_id,
    )
    if before is not None and before["capacity"] is not None:
        # More room (or no limit now): admit what waits, oldest first.
        now = db_now_ms()
        while work_admit_waiting_locked(queue, now) is not None:
            pass
    return queue, True


@transaction.atomic(durable=True)
def queue_create(*, name: str, values: dict[str, Any], actor: Actor, request_id: str = "") -> Queue:
    return queue_save_locked(
        name=name, values=values, actor=actor, create=True, request_id=request_id
    )[0]


@transaction.atomic(durable=True)
def queue_update(
    *, name: str, values: dict[str, Any], actor: Actor, request_id: str = ""
) -> tuple[Queue, bool]:
    return queue_save_locked(
        name=name, values=values, actor=actor, create=False, request_id=request_id
    )


# -- notification targets (webhooks and e-mail) ---------------------------------------------

ALERT_KINDS = tuple(k.value for k in AlertKind)


def notify_checked(raw: dict[str, Any], *, current: dict[str, Any]) -> dict[str, Any]:
    """{"webhooks": [{"url", "secret"}], "emails": [...], "kinds": [...]}. A webhook given
    without a secret keeps the secret it had (a file or a form never shows secrets)."""
    errors: dict[str, str] = {}
    for key in sorted(set(raw) - {"webhooks", "emails", "kinds", "approvals"}):
        errors[f"notify.{key}"] = "unknown field; notify has webhooks, emails, kinds, approvals"
    approvals: dict[str, Any] = {}
    if raw.get("approvals"):
        try:
            approvals = _approvals_checked(raw["approvals"], current.get("approvals") or {})
        except SettingsInvalid as exc:
            errors.update({f"approvals.{k}": v for k, v in exc.errors.items()})
    webhooks = _webhooks_checked(raw.get("webhooks") or [], current, errors)
    emails = _emails_checked(raw.get("emails") or [], errors)
    kinds = list(raw.get("kinds") or [])
    for kind in kinds:
        if kind not in ALERT_KINDS:
            errors["kinds"] = f"{kind!r} is not an alert kind ({', '.join(ALERT_KINDS)})"
    if errors:
        raise SettingsInvalid(errors)
    out: dict[str, Any] = {}
    if webhooks:
        out["webhooks"] = webhooks
    if emails:
        out["emails"] = emails
    if kinds:
        out["kinds"] = kinds
    if approvals:
        out["approvals"] = approvals
    return out


def _webhooks_checked(
    raw: list[Any], current: dict[str, Any], errors: dict[str, str]
) -> list[dict[str, str]]:
    """Each webhook's URL through the address policy and URLValidator; its secret given,
    read from `secret_env`, or kept from the queue's current webhook of that URL."""
    kept = {w.get("url"): w.get("secret", "") for w in current.get("webhooks", [])}
    webhooks = []
    for i, hook in enumerate(raw):
        hook = {"url": hook} if isinstance(hook, str) else hook
        if not isinstance(hook, dict) or set(hook) - {"url", "secret", "secret_env"}:
            errors[f"webhooks[{i}]"] = "a table {url, secret} (or secret_env)"
            continue
        url = str(hook.get("url", "")).strip()
        problem = webhook_url_problem(url, settings.LEASEBOARD_WEBHOOK_ALLOW_NETWORKS)
        if problem is None:
            try:
                URLValidator(schemes=["http", "https"])(url)
            except ValidationError:
                problem = "not an http(s) URL"
        if problem:
            errors[f"webhooks[{i}].url"] = f"{url[:100]!r}: {problem}"
            continue
        secret = str(hook.get("secret") or "")
        if hook.get("secret_env"):
            secret = os.environ.get(str(hook["secret_env"]), "")
            if not secret:
                errors[f"webhooks[{i}].secret_env"] = f"${hook['secret_env']} is not set"
        webhooks.append({"url": url, "secret": secret or kept.get(url, "")})
    return webhooks


def _emails_checked(raw: list[Any], errors: dict[str, str]) -> list[str]:
    """The non-blank addresses, each through the header-safety check and EmailValidator."""
    emails = [str(e).strip() for e in raw if str(e).strip()]
    for i, email in enumerate(emails):
        problem = email_problem(email)
        if problem is None:
            try:
                EmailValidator()(email)
            except ValidationError:
                problem = "not an e-mail address"
        if problem:
            errors[f"emails[{i}]"] = f"{email[:100]!r}: {problem}"
    return emails


def _approvers_checked(raw: Any, current: dict[str, Any]) -> dict[str, Any]:
    """{approvers: [username | "group:<name>"], emails, webhooks} of approver notices."""
    if not isinstance(raw, dict):
        raise SettingsInvalid({"": "a table {approvers, emails, webhooks}"})
    errors: dict[str, str] = {}
    for key in sorted(set(raw) - {"approvers", "emails", "webhooks"}):
        errors[key] = "unknown field; approvals have approvers, emails, webhooks (and rules)"
    approvers = [str(a).strip() for a in raw.get("approvers") or [] if str(a).strip()]
    if any(len(a) > 150 for a in approvers):
        errors["approvers"] = "a username, or group:<name>, of at most 150 characters"
    try:
        targets = notify_checked(
            {k: raw[k] for k in ("emails", "webhooks") if k in raw}, current=current
        )
    except SettingsInvalid as exc:
        errors.update(exc.errors)
        targets = {}
    if errors:
        raise SettingsInvalid(errors)
    return {**({"approvers": approvers} if approvers else {}), **targets}


def _approvals_checked(raw: Any, current: dict[str, Any]) -> dict[str, Any]:
    """The queue's approver notices, and per rule (by name) an entry that replaces them."""
    if not isinstance(raw, dict):
        raise SettingsInvalid({"": "a table {approvers, emails, webhooks, rules}"})
    rules = raw.get("rules") or {}
    if not isinstance(rules, dict):
        raise SettingsInvalid({"rules": "a table of rule name -> {approvers, emails, webhooks}"})
    out = _approvers_checked({k: v for k, v in raw.items() if k != "rules"}, current)
    kept = current.get("rules") or {}
    checked = {}
    for name, entry in rules.items():
        try:
            checked[str(name)] = _approvers_checked(entry, kept.get(name) or {})
        except SettingsInvalid as exc:
            raise SettingsInvalid({f"rules.{name}.{k}": v for k, v in exc.errors.items()}) from None
    if checked:
        out["rules"] = checked
    return out


def notify_shown(notify: dict[str, Any]) -> dict[str, Any]:
    """Notification targets with secrets replaced by whether one is set (audit, export)."""
    shown = {k: v for k, v in (notify or {}).items() if k != "webhooks"}
    if (notify or {}).get("webhooks"):
        shown["webhooks"] = [
            {"url": w.get("url", ""), "secret": "(set)" if w.get("secret") else "(none)"}
            for w in notify["webhooks"]
        ]
    approvals = (notify or {}).get("approvals")
    if approvals:
        shown["approvals"] = {
            **notify_shown({k: v for k, v in approvals.items() if k != "rules"}),
            **(
                {"rules": {n: notify_shown(e) for n, e in approvals["rules"].items()}}
                if approvals.get("rules")
                else {}
            ),
        }
    return shown


def queue_notify_save_locked(
    *, name: str, notify: dict[str, Any], actor: Actor, request_id: str = ""
) -> bool:
    authorize(Act.MANAGE_WEBHOOKS, actor)
    queue = Queue.objects.select_for_update(no_key=True).filter(name=name).first()
    if queue is None:
        raise NotFound(f"no queue {name!r}")
    checked = notify_checked(notify, current=queue.notify or {})
    if checked == (queue.notify or {}):
        return False
    before = notify_shown(queue.notify or {})
    queue.notify = checked
    queue.save(update_fields=["notify"])
    audited(
        Act.MANAGE_WEBHOOKS,
        actor,
        action="queue.notify_update",
        object_type="queue",
        object_id=name,
        before=before,
        after=notify_shown(checked),
        request_id=request_id,
    )
    return True


@transaction.atomic(durable=True)
def queue_notify_update(
    *, name: str, notify: dict[str, Any], actor: Actor, request_id: str = ""
) -> bool:
    return queue_notify_save_locked(name=name, notify=notify, actor=actor, request_id=request_id)
