"""Admission envelopes (docs/design.md §1, the first decision): besides its capacity, a queue may
say which scopes it admits, how many live leases one agent may hold in it, and the time
windows in which it grants leases. Pure: validation with field names, and the checks.

    scopes:  {"env": ["staging", "prod-*"]}   a work item's scope must have `env`, matching
    leases_per_agent: 3
    windows: {"tz": "Europe/Berlin", "open": [{"days": "mon-fri", "from": "08:00", "to": "18:00"}]}

Which limit refused is named in the refusal (`limit`: capacity, scope, leases_per_agent,
window), under the stable codes capacity_exhausted and work_not_admitted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from leaseboard.domain.globs import glob_match, glob_problem

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_TIME = re.compile(r"^([01]\d|2[0-4]):([0-5]\d)$")
MAX_SCOPE_KEYS = 20
MAX_WINDOWS = 20


class EnvelopeInvalid(ValueError):
    """`param` names the field (scopes.env, windows.open[0].from, ...)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param
        self.message = message


# -- scopes ------------------------------------------------------------------------------


def scopes_checked(raw: Any) -> dict[str, list[str]]:
    """{scope key: [globs its value must match one of]}; {} admits every scope."""
    if raw in (None, ""):
        return {}
    if not isinstance(raw, dict):
        raise EnvelopeInvalid("scopes", "a table of scope key -> list of globs")
    if len(raw) > MAX_SCOPE_KEYS:
        raise EnvelopeInvalid("scopes", f"at most {MAX_SCOPE_KEYS} keys")
    out: dict[str, list[str]] = {}
    for key, globs in raw.items():
        if not isinstance(key, str) or not re.match(r"^[A-Za-z0-9_.-]{1,100}$", key):
            raise EnvelopeInvalid("scopes", f"{key!r} is not a scope key (letters, digits, _ . -)")
        if isinstance(globs, str):
            globs = [globs]
        if not isinstance(globs, list) or not globs:
            raise EnvelopeInvalid(f"scopes.{key}", "a non-empty list of globs")
        for glob in globs:
            problem = (
                glob_problem(glob, what="scope value", longest=500)
                if isinstance(glob, str)
                else "a glob is a string"
            )
            if problem:
                raise EnvelopeInvalid(f"scopes.{key}", problem)
        out[key] = list(globs)
    return out


def scope_refusal(admits: dict[str, list[str]], scope: dict[str, Any]) -> str | None:
    """Why a work item with this scope is not admitted, or None."""
    for key, globs in admits.items():
        value = scope.get(key) if isinstance(scope, dict) else None
        if value is None:
            return f"the queue admits only work whose scope has {key!r} ({', '.join(globs)})"
        text = str(value)
        if not any(glob_match(g, text) for g in globs):
            return f"scope {key}={text!r} is outside what the queue admits ({', '.join(globs)})"
    return None


# -- leases per agent --------------------------------------------------------------------


def leases_per_agent_checked(raw: Any) -> int | None:
    if raw in (None, "", 0):
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1 or raw > 100_000:
        raise EnvelopeInvalid("leases_per_agent", "a whole number from 1 to 100000 (or empty)")
    return raw


# -- time windows ------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    days: frozenset[int]  # 0 = Monday
    start_min: int
    end_min: int  # may be below start_min: the window runs past midnight


@dataclass(frozen=True)
class Windows:
    tz: str
    open: tuple[Window, ...]


def _days(raw: Any, param: str) -> frozenset[int]:
    if not isinstance(raw, str) or not raw.strip():
        raise EnvelopeInvalid(param, "days like 'mon-fri', 'sat,sun' or 'daily'")
    text = raw.strip().lower()
    if text in {"daily", "*"}:
        return frozenset(range(7))
    days: set[int] = set()
    for part in text.split(","):
        ends = [p.strip() for p in part.split("-")]
        if len(ends) > 2 or any(e not in DAYS for e in ends):
            raise EnvelopeInvalid(param, f"{part.strip()!r}: days are {', '.join(DAYS)}")
        a, b = DAYS.index(ends[0]), DAYS.index(ends[-1])
        days.update(range(a, b + 1) if a <= b else [*range(a, 7), *range(0, b + 1)])
    return frozenset(days)


def _minutes(raw: Any, param: str) -> int:
    match = _TIME.match(raw.strip()) if isinstance(raw, str) else None
    if not match or (match.group(1) == "24" and match.group(2) != "00"):
        raise EnvelopeInvalid(param, "a time of day HH:MM (00:00 to 24:00)")
    return int(match.group(1)) * 60 + int(match.group(2))


def windows_checked(raw: Any) -> Windows | None:
    """None: always open."""
    if raw in (None, "", {}):
        return None
    if not isinstance(raw, dict) or set(raw) - {"tz", "open"}:
        raise EnvelopeInvalid("windows", "a table with tz and open = [{days, from, to}, ...]")
    tz = raw.get("tz", "UTC")
    try:
        ZoneInfo(str(tz))
    except (ZoneInfoNotFoundError, ValueError):
        raise EnvelopeInvalid("windows.tz", f"{tz!r} is not a time zone name") from None
    spans = raw.get("open") or []
    if not isinstance(spans, list) or not spans:
        raise EnvelopeInvalid("windows.open", "at least one window {days, from, to}")
    if len(spans) > MAX_WINDOWS:
        raise EnvelopeInvalid("windows.open", f"at most {MAX_WINDOWS} windows")
    out = []
    for i, span in enumerate(spans):
        param = f"windows.open[{i}]"
        if not isinstance(span, dict) or set(span) - {"days", "from", "to"}:
            raise EnvelopeInvalid(param, "a table {days, from, to}")
        start = _minutes(span.get("from"), f"{param}.from")
        end = _minutes(span.get("to"), f"{param}.to")
        if start == end:
            raise EnvelopeInvalid(f"{param}.to", "must differ from 'from' (an empty window)")
        out.append(Window(_days(span.get("days"), f"{param}.days"), start, end))
    return Windows(str(tz), tuple(out))


def windows_as_dict(windows: Windows | None) -> dict[str, Any]:
    if windows is None:
        return {}
    spans = []
    for w in windows.open:
        spans.append(
            {
                "days": _days_text(w.days),
                "from": f"{w.start_min // 60:02d}:{w.start_min % 60:02d}",
                "to": f"{w.end_min // 60:02d}:{w.end_min % 60:02d}",
            }
        )
    return {"tz": windows.tz, "open": spans}


def _days_text(days: frozenset[int]) -> str:
    """mon-fri, sat,sun, daily: runs of consecutive days as ranges."""
    if len(days) == 7:
        return "daily"
    runs: list[list[int]] = []
    for d in sorted(days):
        if runs and d == runs[-1][-1] + 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    return ",".join(DAYS[r[0]] if len(r) == 1 else f"{DAYS[r[0]]}-{DAYS[r[-1]]}" for r in runs)


def window_wait_ms(windows: Windows | None, now_ms: int) -> int:
    """0 while a window is open; else milliseconds until the next one opens."""
    if windows is None:
        return 0
    zone = ZoneInfo(windows.tz)
    now = datetime.fromtimestamp(now_ms / 1000, UTC)
    local = now.astimezone(zone)
    best: datetime | None = None
    for offset in range(-1, 8):
        day = (local + timedelta(days=offset)).date()
        for w in windows.open:
            if day.weekday() not in w.days:
                continue
            midnight = datetime(day.year, day.month, day.day, tzinfo=zone)
            start = midnight + timedelta(minutes=w.start_min)
            length = (w.end_min - w.start_min) % (24 * 60) or 24 * 60
            end = start + timedelta(minutes=length)
            if start <= now < end:
                return 0
            if start > now and (best is None or start < best):
                best = start
    if best is None:  # unreachable for a validated window (some day is always listed)
        return 7 * 24 * 3600 * 1000
    return max(1, int((best - now).total_seconds() * 1000))
