"""Rendering a full page: what the header needs on every page (alert badge, the approver's
pending badge, roles, the banner that says expiry sweeps have stopped) and no caching,
since every page shows live state."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from leaseboard.core import badges
from leaseboard.core.clock import now_ms_sql
from leaseboard.core.models import Alert
from leaseboard.core.selectors import alerts_unsnoozed
from leaseboard.core.services.bulk import BULK_MAX
from leaseboard.domain.authority import Act
from leaseboard.domain.sweeps import SweepAge, sweep_age_from
from leaseboard.web.roles import may, user_roles

# Badges count up to this many and then show "99+": a bounded scan.
BADGE_CAP = 99


def _badge_alerts() -> Any:
    return (
        alerts_unsnoozed(
            Alert.objects.filter(resolved_at_ms__isnull=True, acknowledged_at_ms__isnull=True)
        )
        .order_by()
        .values("id")[: BADGE_CAP + 1]
    )


def alert_badge_count() -> int:
    """Open, unacknowledged alerts that are not snoozed, counted up to BADGE_CAP+1 (one
    query)."""
    return _badge_alerts().count()


def badge_and_sweeps() -> tuple[int, SweepAge]:
    """The alert badge's count and how long ago a sweep last completed, in the badge's
    one statement: the stale-sweeps banner costs a page no query of its own."""
    badge_sql, params = _badge_alerts().query.sql_with_params()
    clock = badges.sweep_clock()
    last_sql, last_params = clock().query.sql_with_params() if clock else ("NULL", ())
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT count(*) FROM ({badge_sql}) AS b), ({last_sql}), {now_ms_sql()}",
            (*params, *last_params),
        )
        count, last, now = cursor.fetchone()
    stale_after_s = settings.LEASEBOARD_SWEEPS_STALE_AFTER_S
    return int(count), sweep_age_from(last, int(now), stale_after_s)


def pending_badge_count() -> int:
    """What waits for an approver, as each app that owns such rows registered it
    (leaseboard/core/badges.py: effects waiting for approval under a live lease, pending
    takeover requests); each counted up to BADGE_CAP+1, all in one query."""
    parts: list[str] = []
    params: list[Any] = []
    for n, selector in enumerate(badges.awaiting_approver()):
        sql, values = selector().order_by().values("pk")[: BADGE_CAP + 1].query.sql_with_params()
        parts.append(f"(SELECT count(*) FROM ({sql}) AS p{n})")
        params.extend(values)
    if not parts:
        return 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + " + ".join(parts), params)
        return int(cursor.fetchone()[0])


def no_store(response: HttpResponse) -> HttpResponse:
    response["Cache-Control"] = "no-store"
    return response


def render_page(
    request: HttpRequest, template: str, context: dict[str, Any], status: int = 200
) -> HttpResponse:
    """A full page with the header's badges, roles and the stale-sweeps banner (the roles
    are already read by `act_required`, so this adds the alert badge's query, which also
    reads the sweep's age, and the pending badge's for an approver)."""
    if "alert_badge" not in context:
        context["alert_badge"], context["sweeps"] = badge_and_sweeps()
    if may(request, Act.APPROVE_TAKEOVER) or may(request, Act.APPROVE_EFFECT):
        context.setdefault("pending_badge", pending_badge_count())
    context["roles"] = user_roles(request)
    context["can_acknowledge"] = may(request, Act.ACKNOWLEDGE_ALERT)
    return no_store(render(request, template, context, status=status))


def render_bulk_page(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    picked: list[str],
    bulk: Any,
) -> HttpResponse:
    """A page that acts by query (what matches, counted first; what is ticked, acted on
    with one note or reason; an outcome per row). A POST that acted on nothing (refused,
    or its form invalid) answers 400, the ticks kept."""
    context = {**context, "picked": set(picked), "bulk": bulk, "bulk_max": BULK_MAX}
    status = 400 if request.method == "POST" and bulk is None else 200
    return render_page(request, template, context, status)
