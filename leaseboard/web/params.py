"""Reading form and query parameters that services re-check anyway."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest


def int_param(raw: Any, default: int = -1) -> int:
    """An integer parameter, or `default` (which the service then refuses) when missing or
    malformed: a bad number is the service's form error, never a 500."""
    try:
        return int(raw)
    except (TypeError, ValueError):
        return default


REASON_FIELDS = ("reason_category", "reason_text")  # a reason as a form posts it


def reason_posted(request: HttpRequest) -> dict[str, Any]:
    """The reason a form posts with an act (its category and text), as the services'
    keyword arguments; the service checks them."""
    return {field: request.POST.get(field, "") for field in REASON_FIELDS}
