"""Reading form and query parameters that services re-check anyway."""

from __future__ import annotations

from typing import Any


def int_param(raw: Any, default: int = -1) -> int:
    """An integer parameter, or `default` (which the service then refuses) when missing or
    malformed: a bad number is the service's form error, never a 500."""
    try:
        return int(raw)
    except (TypeError, ValueError):
        return default
