"""Size and content bounds for the opaque JSON documents callers send (checkpoints,
effect payloads, scopes)."""

from __future__ import annotations

import json
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
