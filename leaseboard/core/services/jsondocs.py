"""Size and content bounds for the opaque JSON documents callers send (checkpoints,
effect payloads, scopes), and the one comparison of two documents."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from leaseboard.domain.errors import ValidationFailed


def json_size_checked(value: Any, *, param: str, limit: int) -> int:
    """Encoded size in bytes; refuses documents over `limit` and NUL characters, which
    PostgreSQL's jsonb cannot store (a clear 400 instead of a database error)."""
    try:
        encoded = json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationFailed(f"{param} is not a JSON document: {exc}", param=param) from None
    if "\\u0000" in encoded:
        raise ValidationFailed(f"{param} must not contain NUL characters", param=param)
    size = len(encoded.encode())
    if size > limit:
        raise ValidationFailed(f"{param} is {size} bytes; the limit is {limit}", param=param)
    return size


def json_canonical(value: Any) -> Any:
    """A document as a comparable value: numbers by their decimal value, as PostgreSQL's
    jsonb keeps them. jsonb rewrites 1e16 as 10000000000000000 (read back as an int) and
    1e-5 as 0.00001, so the payload as stored and the same payload as sent compare equal
    only by value, never by spelling or Python type (issue 33). A number is tagged: true
    equals 1 in Python (and in Decimal), never in JSON."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return ("number", Decimal(value))
    if isinstance(value, float):
        # repr is the shortest spelling that reads back as this float: what was sent.
        return ("number", Decimal(repr(value)))
    if isinstance(value, dict):
        return {key: json_canonical(child) for key, child in value.items()}
    if isinstance(value, list | tuple):
        return [json_canonical(child) for child in value]
    return value
