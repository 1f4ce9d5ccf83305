"""Template filters every app's pages use (`{% load web %}`): database-clock milliseconds as
times and durations, JSON, and query strings."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from django import template

register = template.Library()


@register.filter
def ms_time(value: int | None) -> str:
    """Database-clock ms as a UTC time; the full date sits in the title attribute."""
    if value is None or value == "":
        return "—"
    return datetime.fromtimestamp(int(value) / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


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


@register.filter
def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


@register.simple_tag
def query(params: dict[str, str], **changes: Any) -> str:
    """`?a=1&b=2` from a dict with changes applied; empty values dropped."""
    merged = {**params, **{k: str(v) for k, v in changes.items()}}
    merged = {k: v for k, v in merged.items() if v not in ("", "None")}
    return "?" + urlencode(merged) if merged else "?"
