"""Rendering a full page: what the header needs on every page (alert badge, the approver's
pending badge, roles, the banner that says expiry sweeps have stopped) and no caching,
since every page shows live state."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from leaseboard.core.clock import now_ms_sql
from leaseboard.core.models import Alert, Effect, Lease
from leaseboard.core.selectors import alerts_unsnoozed
from leaseboard.core.sql import literal
from leaseboard.domain.authority import Act
from leaseboard.domain.certainty import LIVE, Certainty
from leaseboard.domain.reconciliation import Decision
from leaseboard.domain.sweeps import SweepAge, sweep_age_from
from leaseboard.web.roles import may, user_roles

# Badges count up to this many and then show "99+": a bounded scan.
BADGE_CAP = 99
PENDING = "'pending'"  # the takeover workflow's RequestStatus.PENDING (not imported here)


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
    # The sweeps' table through the app registry (sweeps import takeovers, which import
    # this web layer: an import here would close the loop).
    state = apps.get_model("sweeps", "SweepState")._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT count(*) FROM ({badge_sql}) AS b), "
            f"(SELECT last_completed_at_ms FROM {state} WHERE id = 1), {now_ms_sql()}",
            params,
        )
        count, last, now = cursor.fetchone()
    stale_after_s = settings.LEASEBOARD_SWEEPS_STALE_AFTER_S
    return int(count), sweep_age_from(last, int(now), stale_after_s)


def pending_badge_count() -> int:
    """What waits for an approver: pending takeover requests (read from the takeover
    workflow's table through the app registry, as the templates find its URLs by name)
    and effects waiting for approval under a lease that is still live; each counted up to
    BADGE_CAP+1, in one query."""
    cap = BADGE_CAP + 1
    live = ", ".join(literal(c) for c in Certainty if c in LIVE)
    effects = (
        f"SELECT 1 FROM {Effect._meta.db_table} e JOIN {Lease._meta.db_table} l "
        f"ON l.id = e.lease_id WHERE e.decision = {literal(Decision.PENDING_APPROVAL)} "
        f"AND l.state IN ({live}) AND l.expires_at_ms > {now_ms_sql()} LIMIT {cap}"
    )
    parts = [f"(SELECT count(*) FROM ({effects}) AS e)"]
    if apps.is_installed("leaseboard.takeovers"):
        table = apps.get_model("takeovers", "TakeoverRequest")._meta.db_table
        requests = f"SELECT 1 FROM {table} WHERE status = {PENDING} LIMIT {cap}"
        parts.append(f"(SELECT count(*) FROM ({requests}) AS r)")
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + " + ".join(parts))
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
