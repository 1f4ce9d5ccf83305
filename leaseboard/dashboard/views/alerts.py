"""The alerts page (grouped by agent and kind, self-refreshing; or one group's alerts one
by one), the header's badges, and acknowledging or snoozing alerts: one, or whole groups
with one note."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from leaseboard.core.models import Alert
from leaseboard.core.replicas import reads_from_replica
from leaseboard.core.services import alerts as alert_services
from leaseboard.dashboard.selectors import alerts as alert_reads
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import LeaseboardError, NotFound
from leaseboard.web.htmx import page_or_fragment, polled_fragment, wants_fragment
from leaseboard.web.pages import badge_and_sweeps, pending_badge_count, render_page
from leaseboard.web.params import int_param
from leaseboard.web.redirects import redirect_next
from leaseboard.web.refusals import WHO_YOU_ARE, refuse
from leaseboard.web.roles import act_required, acting, may

SNOOZE_CHOICES = ((15, "15 minutes"), (60, "1 hour"), (240, "4 hours"), (1440, "1 day"))


@require_GET
@act_required(Act.WATCH)
def alert_badge(request: HttpRequest) -> HttpResponse:
    """The polled badge; and, when the page shows the sweeps banner otherwise than they now
    are (`sweeps_shown`), the banner out of band, so it comes and goes without a reload."""
    count, sweeps = badge_and_sweeps()
    shown = request.GET.get("sweeps_shown")
    context = {
        "alert_badge": count,
        "sweeps": sweeps,
        "sweeps_oob": shown is not None and shown != ("1" if sweeps.stale else "0"),
    }
    return page_or_fragment(render(request, "dashboard/_badge_poll.html", context))


@require_GET
@act_required(Act.APPROVE_TAKEOVER, Act.APPROVE_EFFECT)
def pending_badge(request: HttpRequest) -> HttpResponse:
    context = {"pending_badge": pending_badge_count()}
    return page_or_fragment(render(request, "dashboard/_pending_badge.html", context))


@require_GET
@act_required(Act.WATCH)
@reads_from_replica
def alerts(request: HttpRequest) -> HttpResponse:
    filters = alert_reads.AlertFilters.from_query(request.GET)
    context = {
        "f": filters,
        "kinds": Alert.Kind.values,
        "states": alert_reads.STATES,
        "snooze_choices": SNOOZE_CHOICES,
        "no_agent": alert_reads.NO_AGENT,
    }
    if filters.view == "list":
        context["page"] = alert_reads.alerts_list(filters)
        return page_or_fragment(render_page(request, "dashboard/alerts_list.html", context))
    page = alert_reads.alert_groups(filters)
    # The poll counts what is new since the page was opened: the newest alert shown then.
    context.update(page=page, since=filters.since or page.max_id)
    if wants_fragment(request, "alert-groups"):
        context["can_acknowledge"] = may(request, Act.ACKNOWLEDGE_ALERT)
        return polled_fragment(
            request,
            "dashboard/_alert_groups.html",
            context,
            version=page.version,
            seq=page.now_ms,
        )
    return page_or_fragment(render_page(request, "dashboard/alerts.html", context))


@require_POST
@act_required(Act.ACKNOWLEDGE_ALERT)
def alert_acknowledge(request: HttpRequest, pk: int) -> HttpResponse:
    note = request.POST.get("note", "")
    error = ""
    try:
        ack = alert_services.alert_acknowledge(alert_id=pk, note=note, **acting(request))
        alert = ack.alert
    except NotFound:
        raise Http404("no such alert") from None
    except LeaseboardError as exc:
        if exc.code in WHO_YOU_ARE:
            raise PermissionDenied(exc.detail) from None
        error = exc.detail
        alert = None
    if request.htmx:  # type: ignore[attr-defined]
        if alert is None:
            page_alert = alert_reads.alert_for_row(pk)
            if page_alert is None:
                raise Http404("no such alert")
            alert = page_alert
        context = {"alert": alert, "error": error, "note": note, "can_acknowledge": True}
        return page_or_fragment(render(request, "dashboard/_alert_row.html", context))
    if error:
        messages.error(request, f"Alert {pk}: {error}")
    else:
        messages.success(request, f"Alert {pk} acknowledged.")
    # `next` comes from the browser: only a path on this site is honoured.
    return redirect_next(request, reverse("dashboard:alerts"))


def _groups_acted(
    request: HttpRequest, act: Callable[[], Any], *, prefix: str, said: Callable[[Any], str]
) -> HttpResponse:
    """An act on the picked alert groups: its refusal, or `said(result)`, on the alerts
    page."""
    try:
        result = act()
    except LeaseboardError as exc:
        refuse(request, exc, prefix=prefix)
    else:
        messages.success(request, said(result))
    return redirect_next(request, reverse("dashboard:alerts"))


@require_POST
@act_required(Act.ACKNOWLEDGE_ALERT)
def alerts_acknowledge_groups(request: HttpRequest) -> HttpResponse:
    return _groups_acted(
        request,
        lambda: alert_services.alerts_acknowledge_groups(
            groups=request.POST.getlist("group"),
            upto_id=int_param(request.POST.get("upto"), 0),
            note=request.POST.get("note", ""),
            **acting(request),
        ),
        prefix="Acknowledge: ",
        said=lambda n: f"{n} alert(s) acknowledged with your note.",
    )


@require_POST
@act_required(Act.ACKNOWLEDGE_ALERT)
def alerts_snooze_groups(request: HttpRequest) -> HttpResponse:
    minutes = int_param(request.POST.get("minutes"), 0)
    return _groups_acted(
        request,
        lambda: alert_services.alerts_snooze_groups(
            groups=request.POST.getlist("group"),
            minutes=minutes,
            note=request.POST.get("note", ""),
            **acting(request),
        ),
        prefix="Snooze: ",
        said=lambda snoozes: (
            f"{len(snoozes)} group(s) snoozed for {minutes} minutes, new alerts included."
        ),
    )
