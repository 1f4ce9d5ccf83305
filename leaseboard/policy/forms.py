"""Browser forms for the settings pages. They only parse text into the shapes the
services take; the services validate everything (and name the field that is wrong), and
`errors_to_form` puts each service error under the form field it belongs to."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import asdict
from typing import Any

import tomli_w
from django import forms

from leaseboard.domain.authority import ROLE_NAMES
from leaseboard.domain.expressions import VARIABLES
from leaseboard.domain.policy import RuleSpec
from leaseboard.domain.reconciliation import PolicyDecision
from leaseboard.domain.vocabulary import AlertKind
from leaseboard.policy.services.queues import TIMING_KEYS

DECISIONS = [(d.value, d.value.replace("_", " ")) for d in PolicyDecision]
ROLE_CHOICES = [(name, name) for name in ROLE_NAMES]


def _text(rows: int = 3, **attrs: Any) -> forms.Textarea:
    return forms.Textarea(attrs={"rows": rows, **attrs})


class QueueForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="a-z 0-9 _ -; cannot be changed later")
    capacity = forms.IntegerField(
        required=False, help_text="open admitted work items at once; empty: no limit"
    )
    overflow = forms.ChoiceField(
        choices=[("wait", "wait"), ("reject", "reject")], help_text="beyond the capacity"
    )
    ttl_ms = forms.IntegerField(required=False, label="ttl (ms)")
    renew_after_ms = forms.IntegerField(required=False, label="renew after (ms)")
    jeopardy_after_ms = forms.IntegerField(required=False, label="jeopardy after (ms)")
    lock_delay_ms = forms.IntegerField(required=False, label="lock delay (ms)")
    max_lifetime_ms = forms.IntegerField(required=False, label="max lifetime (ms)")
    reconciliation_gate = forms.BooleanField(
        required=False,
        label="Reconciliation gate",
        help_text="agents may not re-acquire while earlier effects are unreconciled",
    )
    scopes = forms.CharField(
        required=False,
        widget=_text(2, placeholder="env = staging, prod-*"),
        help_text="one line per scope key: key = glob, glob; empty admits any scope",
    )
    leases_per_agent = forms.IntegerField(
        required=False, help_text="live leases one agent may hold here; empty: no limit"
    )
    windows_tz = forms.CharField(required=False, label="Windows' time zone", initial="UTC")
    windows = forms.CharField(
        required=False,
        widget=_text(2, placeholder="mon-fri 08:00-18:00"),
        help_text="leases are granted only inside these; one per line; empty: always",
    )

    def values(self) -> dict[str, Any]:
        d = self.cleaned_data
        timing = {k: d[k] for k in TIMING_KEYS if d.get(k) is not None}
        windows: dict[str, Any] = {}
        spans = []
        for line in (d.get("windows") or "").splitlines():
            parts = line.split()
            if parts:  # "mon-fri 08:00-18:00"
                start, _, end = (parts[1] if len(parts) > 1 else "").partition("-")
                spans.append({"days": parts[0], "from": start, "to": end})
        if spans:
            windows = {"tz": (d.get("windows_tz") or "UTC").strip(), "open": spans}
        scopes: dict[str, Any] = {}
        for line in (d.get("scopes") or "").splitlines():
            if line.strip():
                key, _, globs = line.partition("=")
                scopes[key.strip()] = [g.strip() for g in globs.split(",") if g.strip()]
        return {
            "capacity": d.get("capacity"),
            "overflow": d["overflow"],
            "timing": timing,
            "reconciliation_gate": bool(d.get("reconciliation_gate")),
            "scopes": scopes,
            "leases_per_agent": d.get("leases_per_agent"),
            "windows": windows,
        }

    @classmethod
    def initial_from(cls, name: str, snap: dict[str, Any]) -> dict[str, Any]:
        windows = snap.get("windows") or {}
        return {
            "name": name,
            "capacity": snap["capacity"],
            "overflow": snap["overflow"],
            **{k: snap["timing"].get(k) for k in TIMING_KEYS},
            "reconciliation_gate": snap["reconciliation_gate"],
            "scopes": "\n".join(f"{k} = {', '.join(v)}" for k, v in snap["scopes"].items()),
            "leases_per_agent": snap["leases_per_agent"],
            "windows_tz": windows.get("tz", "UTC"),
            "windows": "\n".join(
                f"{w['days']} {w['from']}-{w['to']}" for w in windows.get("open", [])
            ),
        }


# Service field names -> the form field that shows the error.
def queue_field(name: str) -> str:
    head = name.split(".")[0].split("[")[0]
    if head == "timing":
        return name.split(".", 1)[1] if "." in name else "ttl_ms"
    if head == "windows":
        return "windows_tz" if name == "windows.tz" else "windows"
    return head if head in QueueForm.base_fields else "__all__"


class RuleForm(forms.Form):
    name = forms.CharField(max_length=80, help_text="a-z 0-9 . _ -; unique in the queue")
    kind = forms.CharField(max_length=500, initial="*", help_text="glob: payment.* , *")
    target = forms.CharField(max_length=500, initial="*", help_text="glob: prod-* , *")
    when = forms.CharField(
        required=False,
        max_length=1000,
        widget=_text(2, placeholder="payload.amount_cents > 50000"),
        label="Condition (CEL)",
        help_text="empty: always. May read: " + ", ".join(sorted(VARIABLES)),
    )
    decision = forms.ChoiceField(choices=DECISIONS)
    note = forms.CharField(required=False, max_length=500)
    decide_within_ms = forms.IntegerField(
        required=False,
        label="Decide within (ms)",
        help_text="require approval only: empty means the configured default",
    )
    on_timeout = forms.ChoiceField(
        required=False,  # absent: reject
        choices=[("reject", "reject"), ("approve", "approve")],
        initial="reject",
        label="When nobody decides in time",
        help_text="require approval only",
    )

    @staticmethod
    def initial_from(spec: RuleSpec) -> dict[str, Any]:
        """Every field of the rule (the form's fields are RuleSpec's, by name), so that
        saving the form unchanged changes nothing."""
        return asdict(spec)

    def spec(self) -> RuleSpec:
        d = self.cleaned_data
        return RuleSpec(
            name=d["name"].strip(),
            kind=d["kind"].strip(),
            target=d["target"].strip(),
            when=d["when"].strip(),
            decision=d["decision"],
            note=d["note"].strip(),
            decide_within_ms=d.get("decide_within_ms"),
            on_timeout=d.get("on_timeout") or "reject",
        )


class DefaultForm(forms.Form):
    default = forms.ChoiceField(choices=DECISIONS, label="When no rule matches")


APPROVALS_PLACEHOLDER = 'approvers = ["abe", "group:payments-approvers"]'


class NotifyForm(forms.Form):
    webhooks = forms.CharField(
        required=False,
        widget=_text(3, placeholder="https://hooks.example.com/leaseboard"),
        help_text="one URL per line; a secret after a space (blank keeps the current one)",
    )
    emails = forms.CharField(required=False, widget=_text(2), help_text="one address per line")
    kinds = forms.MultipleChoiceField(
        required=False,
        choices=[(k.value, k.value) for k in AlertKind],
        widget=forms.CheckboxSelectMultiple,
        help_text="none ticked: every kind",
    )
    approvals = forms.CharField(
        required=False,
        max_length=20_000,
        widget=_text(6, placeholder=APPROVALS_PLACEHOLDER),
        label="Approver notices (TOML)",
        help_text="who is asked when an effect waits for approval: approvers (users or "
        "group:NAME), emails, webhooks (by URL: a secret stays as it is), and [rules.NAME] "
        "entries that replace them for one rule; empty: the approver group",
    )

    @staticmethod
    def initial_from(notify: dict[str, Any]) -> dict[str, Any]:
        """Every target the queue has, secrets left out (they stay as they are)."""
        approvals = notify.get("approvals") or {}
        return {
            "webhooks": "\n".join(w.get("url", "") for w in notify.get("webhooks", [])),
            "emails": "\n".join(notify.get("emails", [])),
            "kinds": notify.get("kinds", []),
            "approvals": tomli_w.dumps(_without_secrets(approvals)) if approvals else "",
        }

    def clean_approvals(self) -> dict[str, Any]:
        raw = self.cleaned_data.get("approvals") or ""
        try:
            return tomllib.loads(raw) if raw.strip() else {}
        except tomllib.TOMLDecodeError as exc:
            raise forms.ValidationError(f"not TOML: {exc}") from None

    def values(self) -> dict[str, Any]:
        hooks = []
        for line in (self.cleaned_data.get("webhooks") or "").splitlines():
            parts = line.split()
            if parts:
                hooks.append({"url": parts[0], "secret": parts[1] if len(parts) > 1 else ""})
        emails = [e.strip() for e in (self.cleaned_data.get("emails") or "").splitlines()]
        return {
            "webhooks": hooks,
            "emails": [e for e in emails if e],
            "kinds": list(self.cleaned_data.get("kinds") or []),
            "approvals": self.cleaned_data.get("approvals") or {},
        }


def _without_secrets(entry: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in entry.items() if k != "rules"}
    if out.get("webhooks"):
        out["webhooks"] = [{"url": w.get("url", "")} for w in out["webhooks"]]
    if entry.get("rules"):
        out["rules"] = {name: _without_secrets(e) for name, e in entry["rules"].items()}
    return out


class ExplainForm(forms.Form):
    queue = forms.CharField(required=False, max_length=100)
    work_key = forms.CharField(
        required=False, max_length=200, help_text="optional: the evidence of this work item"
    )
    kind = forms.CharField(max_length=100, initial="payment.refund")
    target = forms.CharField(max_length=500, initial="order-1")
    payload = forms.CharField(
        required=False, widget=_text(4), initial="{}", help_text="a JSON object"
    )

    def clean_payload(self) -> dict[str, Any]:
        raw = (self.cleaned_data.get("payload") or "").strip() or "{}"
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise forms.ValidationError(f"not JSON: {str(exc)[:200]}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("a JSON object: {...}")
        return value


class RoleScopesField(forms.CharField):
    """Roles held for named queues only, as `role:queue` entries separated by spaces or
    commas ("operator:payments approver:refunds"); blank: every role for every queue."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("max_length", 2000)
        kwargs.setdefault("label", "Only in queues")
        kwargs.setdefault("help_text", "role:queue, … — blank: every queue")
        super().__init__(**kwargs)

    def clean(self, value: Any) -> dict[str, list[str]]:
        text = super().clean(value)
        scopes: dict[str, list[str]] = {}
        for entry in re.split(r"[\s,]+", text.strip()) if text.strip() else []:
            role, sep, queue = entry.partition(":")
            if not sep or not queue:
                raise forms.ValidationError(f"{entry!r}: write role:queue")
            scopes.setdefault(role, []).append(queue)
        return scopes


class PersonForm(forms.Form):
    username = forms.CharField(max_length=150)
    email = forms.EmailField(required=False)
    roles = forms.MultipleChoiceField(choices=ROLE_CHOICES, widget=forms.CheckboxSelectMultiple)
    scopes = RoleScopesField()


class PersonRolesForm(forms.Form):
    roles = forms.MultipleChoiceField(
        required=False, choices=ROLE_CHOICES, widget=forms.CheckboxSelectMultiple
    )
    scopes = RoleScopesField()
    break_glass = forms.BooleanField(required=False, label="break glass")
    active = forms.BooleanField(required=False, label="may sign in")


class QueueScopeForm(forms.Form):
    """The queues an agent may admit work to and work in: some by name, or every queue
    (also ones made later), which must be ticked explicitly."""

    queues = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Queues it may use"
    )
    all_queues = forms.BooleanField(
        required=False, label="every queue, including queues made later"
    )

    def __init__(self, *args: Any, queue_names: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if queue_names is None:
            from leaseboard.core.models import Queue

            queue_names = list(Queue.objects.order_by("name").values_list("name", flat=True))
        self.fields["queues"].choices = [(n, n) for n in queue_names]  # type: ignore[attr-defined]


class CredentialForm(QueueScopeForm):
    name = forms.CharField(max_length=150, label="Agent name")
    field_order = ["name", "queues", "all_queues"]


class RecipientForm(forms.Form):
    name = forms.CharField(max_length=100, label="Recipient name")


class DecisionNoteForm(forms.Form):
    note = forms.CharField(required=False, max_length=1000)


def errors_to_form(form: forms.Form, errors: dict[str, str], field_of: Any = None) -> None:
    """Put service errors ({field: message}) on the form's fields (else non-field)."""
    for name, message in errors.items():
        target = field_of(name) if field_of else name
        if target not in form.fields:
            form.add_error(None, f"{name}: {message}")
        else:
            form.add_error(target, message)
