"""Template filters every app's pages use (`{% load web %}`): database-clock milliseconds as
times (in the viewer's zone, via static/leaseboard.js) and durations, labels for stored
codes, JSON, and query strings."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from django import template
from django.conf import settings
from django.utils.html import format_html
from django.utils.safestring import SafeString

from leaseboard.core.display_hints import display_hints_loaded
from leaseboard.domain.amounts import Amount, amount_shown
from leaseboard.domain.diffs import field_diff
from leaseboard.domain.vocabulary import REASON_LABELS, ReasonCategory

register = template.Library()


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(int(ms) / 1000, tz=UTC)


@register.filter
def ms_iso(value: int | None) -> str:
    """ISO 8601 with its offset (UTC), to the millisecond: for machines and CSV."""
    if value is None or value == "":
        return ""
    return _utc(int(value)).isoformat(timespec="milliseconds")


@register.filter
def ms_time(value: int | None) -> str:
    """A <time> the page shows in the viewer's zone with the zone named, the exact time on
    hover; without JavaScript it reads as UTC, labelled so."""
    if value is None or value == "":
        return "—"
    at = _utc(int(value))
    return format_html(
        '<time datetime="{}" data-ms="{}">{} UTC</time>',
        at.isoformat(timespec="milliseconds"),
        int(value),
        at.strftime("%Y-%m-%d %H:%M:%S"),
    )


@register.filter
def ms_ago(value: int | None) -> str:
    """Like ms_time, shown relative ("12 s ago"), the exact time on hover; without
    JavaScript the time, with its date when it is not today's (display only, UTC)."""
    if value is None or value == "":
        return "—"
    at = _utc(int(value))
    today = datetime.now(tz=UTC).date()
    return format_html(
        '<time datetime="{}" data-ms="{}" data-relative>at {} UTC</time>',
        at.isoformat(timespec="milliseconds"),
        int(value),
        at.strftime("%H:%M:%S" if at.date() == today else "%Y-%m-%d %H:%M:%S"),
    )


@register.filter
def ms_duration(value: int | None) -> str:
    if value is None or value == "":
        return "—"
    ms = int(value)
    sign = "-" if ms < 0 else ""
    ms = abs(ms)
    if ms < 1000:
        return f"{sign}{ms} ms"
    if ms < 60_000:
        return f"{sign}{ms / 1000:.1f} s"
    minutes, seconds = divmod(ms // 1000, 60)
    if minutes < 60:
        return f"{sign}{minutes} m {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{sign}{hours} h {minutes:02d} m"


CERTAINTY_LABELS = {
    "active": "● ACTIVE",
    "jeopardy": "▲ JEOPARDY",
    "expired": "✕ EXPIRED",
    "released": "○ RELEASED",
    "revoked": "⊘ REVOKED",
}


@register.filter
def certainty_badge(certainty: str) -> SafeString:
    """A lease's certainty as its badge (templates/dashboard/_certainty.html)."""
    label = CERTAINTY_LABELS.get(certainty) or str(certainty).upper()
    return format_html('<span class="cert cert-{}">{}</span>', certainty, label)


@register.filter
def reason_label(value: str) -> str:
    """A reason category's words instead of its stored code ("unknown_outcome")."""
    try:
        return REASON_LABELS[ReasonCategory(value)]
    except ValueError:
        return str(value or "—")


@register.filter
def words(value: str) -> str:
    """A stored code as words: "not_applied" -> "not applied"."""
    return str(value or "").replace("_", " ")


@register.filter
def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


@register.simple_tag
def query(params: dict[str, str], **changes: Any) -> str:
    """`?a=1&b=2` from a dict with changes applied; empty values dropped."""
    merged = {**params, **{k: str(v) for k, v in changes.items()}}
    merged = {k: v for k, v in merged.items() if v not in ("", "None")}
    return "?" + urlencode(merged) if merged else "?"


@register.inclusion_tag("dashboard/_trace_id.html")
def trace_id(value: str) -> dict[str, str]:
    """A trace id, selectable and copyable, linked to the trace viewer when one is set
    (LEASEBOARD_TRACE_URL, with {trace_id} in it)."""
    template = settings.LEASEBOARD_TRACE_URL
    return {
        "trace_id": value,
        "url": template.replace("{trace_id}", value) if template and value else "",
    }


@register.filter
def in_queue(can: Any, queue: str) -> Any:
    """`{% with c=can|in_queue:item.queue.name %}{% if c.revoke %}`: what the person may
    do with work in this queue (leaseboard.web.roles.Can)."""
    return can.in_queue(queue)


@register.inclusion_tag("dashboard/_diff.html")
def history_diff(before: Any, after: Any) -> dict[str, Any]:
    """An audit entry's before -> after as field-by-field differences (added, removed,
    changed, each said in words, not by colour alone)."""
    return {"diffs": field_diff(before, after)}


@register.simple_tag(takes_context=True)
def effect_amount(context: template.Context, effect: Any) -> Amount | None:
    """`{% effect_amount e as amount %}`: the effect's amount as its kind's display hint
    says ("$1,250.00", from `amount_field`), or None. The hints are read once a request."""
    request = context.get("request")
    hints = getattr(request, "_display_hints", None)
    if hints is None:
        hints = display_hints_loaded()
        if request is not None:
            request._display_hints = hints  # type: ignore[attr-defined]
    payload = getattr(effect, "display_payload", None)  # core.display_hints' annotation
    if payload is None and "payload" not in effect.get_deferred_fields():
        payload = effect.payload
    return amount_shown(effect.kind, payload, hints)
