"""Text every supported database can store: no NUL (PostgreSQL's text and jsonb refuse it)
and no lone surrogate (no UTF-8 encoding exists for one). The API refuses such input as a
validation error; read-only filters replace the characters, so they match nothing stored."""

from __future__ import annotations

import re
from typing import Any

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def storable(value: str) -> bool:
    return _UNSTORABLE.search(value) is None


def storable_or_replaced(value: str) -> str:
    """For filters and lookups: each unstorable character becomes U+FFFD."""
    return _UNSTORABLE.sub(REPLACEMENT, value)


def filter_text(params: Any, name: str, longest: int) -> str:
    """A read-only page's text filter from its query parameters (any mapping with `get`):
    trimmed, at most `longest` characters, each unstorable character replaced (so it
    matches nothing stored, and never reaches the database as a NUL)."""
    return storable_or_replaced(params.get(name, "").strip()[:longest])


def json_storable(value: Any) -> bool:
    """Every string in a JSON document, keys included, is storable."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not storable(item):
                return False
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and not storable(key):
                    return False
                stack.append(child)
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return True
