"""Keyset pagination: read one row more than the page, cut, and name the next page by the
last row's sort key. No OFFSET and no COUNT(*), so every page costs the same. And the
version of a polled page (`page_version`), by which its poll answers 304."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
K = TypeVar("K")


def cut_page(rows: list[T], size: int, cursor_of: Callable[[T], str]) -> tuple[list[T], str]:
    """`rows` read with LIMIT size+1 -> (the page, the next page's cursor or "")."""
    if len(rows) <= size:
        return rows, ""
    rows = rows[:size]
    return rows, cursor_of(rows[-1])


def pair_cursor(raw: str, tail: Callable[[str], K], sep: str = "_") -> tuple[int, K] | None:
    """Parse "<int><sep><tail>" (a sort key and a tie-breaking id); None when malformed."""
    head, _, rest = raw.partition(sep)
    try:
        return int(head), tail(rest)
    except ValueError:
        return None


def int_cursor(raw: str) -> int | None:
    """Parse a single integer cursor; None when empty or malformed."""
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        return None


def page_version(body: Any) -> str:
    """The version of a polled page from what its fragment shows (`body`, JSON-able; other
    values by their str): equal bodies, equal versions, so the poll may answer 304. The one
    hash of every polled page (the live page, alerts, approvals, standing)."""
    raw = json.dumps(body, separators=(",", ":"), sort_keys=True, default=str).encode()
    return hashlib.sha256(raw).hexdigest()[:20]
