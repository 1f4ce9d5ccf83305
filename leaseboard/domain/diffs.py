"""Field-by-field differences between two recorded states (an audit entry's before and
after), for history pages: each leaf under its dotted path (`timing.ttl_ms`,
`rules[0].when`), said as added, removed or changed. Pure: no Django."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Change(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"


@dataclass(frozen=True)
class FieldDiff:
    path: str  # "" for the whole value (a scalar, or one side missing entirely)
    change: Change
    before: str  # shown as JSON ("" when added)
    after: str  # shown as JSON ("" when removed)


_MISSING = object()


def _shown(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _leaves(value: Any, path: str, out: dict[str, Any]) -> None:
    """Each scalar (and each empty container) of `value` under its path."""
    if isinstance(value, dict) and value:
        for key in value:
            _leaves(value[key], f"{path}.{key}" if path else str(key), out)
    elif isinstance(value, list) and value:
        for i, item in enumerate(value):
            _leaves(item, f"{path}[{i}]", out)
    else:
        out[path] = value


def field_diff(before: Any, after: Any) -> list[FieldDiff]:
    """What changed from `before` to `after`, in path order; [] when they are equal. A
    side that is None (a creation, a deletion) counts as empty: every field is added or
    removed."""
    if _shown(before) == _shown(after):  # not `==`: 1 and True are equal in Python
        return []
    old: dict[str, Any] = {}
    new: dict[str, Any] = {}
    if before is not None:
        _leaves(before, "", old)
    if after is not None:
        _leaves(after, "", new)
    out = []
    for path in sorted(set(old) | set(new)):
        was, now = old.get(path, _MISSING), new.get(path, _MISSING)
        if _emptied_parent(path, old if was is _MISSING else new):
            continue  # `scopes: {}` beside `scopes.a[0]` removed says nothing more
        if was is _MISSING:
            out.append(FieldDiff(path, Change.ADDED, "", _shown(now)))
        elif now is _MISSING:
            out.append(FieldDiff(path, Change.REMOVED, _shown(was), ""))
        elif was != now or type(was) is not type(now):
            out.append(FieldDiff(path, Change.CHANGED, _shown(was), _shown(now)))
    return out


def _emptied_parent(path: str, other: dict[str, Any]) -> bool:
    """Is `path` an empty container whose fields the other side lists one by one?"""
    return any(p.startswith((f"{path}.", f"{path}[")) for p in other) if path else False
