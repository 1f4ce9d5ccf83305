"""Keyset paging of the live page: the cursor (the last row's sort values, encoded; one
that does not parse is None, never an error), the condition "strictly after it" in a sort's
order, and a row's sort values."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from django.db.models import Q

from leaseboard.dashboard.selectors.rows import LiveLease
from leaseboard.domain.text import storable


def encode_cursor(values: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")


def decode_cursor(raw: str, width: int) -> list[Any] | None:
    if not raw:
        return None
    try:
        values = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (ValueError, binascii.Error):
        return None
    if not isinstance(values, list) or len(values) != width:
        return None
    if not all(isinstance(v, str | int) and not isinstance(v, bool) for v in values):
        return None
    if not all(storable(v) for v in values if isinstance(v, str)):
        return None  # a NUL names no stored key, and PostgreSQL refuses the parameter
    return values


def keyset_after(fields: tuple[str, ...], values: list[Any], descending: bool) -> Q:
    """Rows strictly after `values` in the order of `fields` (a keyset condition), with the
    leading column alone as an index range."""
    op = "lt" if descending else "gt"
    cond = Q(**{f"{fields[-1]}__{op}": values[-1]})
    for name, value in zip(reversed(fields[:-1]), reversed(values[:-1]), strict=True):
        cond = Q(**{f"{name}__{op}": value}) | (Q(**{name: value}) & cond)
    return cond & Q(**{f"{fields[0]}__{op}e": values[0]})


def sort_values(lease: LiveLease, fields: tuple[str, ...]) -> list[Any]:
    out: list[Any] = []
    for name in fields:
        obj: Any = lease
        for part in name.split("__"):
            obj = getattr(obj, part)
        out.append(obj)
    return out
