"""Rendering a full page: what the header needs on every page (alert badge, roles) and
no caching, since every page shows live state."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from leaseboard.core.models import Alert
from leaseboard.web.roles import OPERATOR, has_role, user_roles

# The badge counts up to this many and then shows "99+": a bounded scan.
BADGE_CAP = 99


def alert_badge_count() -> int:
    """Open, unacknowledged alerts, counted up to BADGE_CAP+1 (one query)."""
    return (
        Alert.objects.filter(resolved_at_ms__isnull=True, acknowledged_at_ms__isnull=True)
        .order_by()
        .values("id")[: BADGE_CAP + 1]
        .count()
    )


def no_store(response: HttpResponse) -> HttpResponse:
    response["Cache-Control"] = "no-store"
    return response


def render_page(
    request: HttpRequest, template: str, context: dict[str, Any], status: int = 200
) -> HttpResponse:
    """A full page with the header's badge and roles (the roles are already read by
    `role_required`, so this adds the badge's one query)."""
    context.setdefault("alert_badge", alert_badge_count())
    context["roles"] = user_roles(request)
    context["can_acknowledge"] = has_role(request, OPERATOR)
    return no_store(render(request, template, context, status=status))
