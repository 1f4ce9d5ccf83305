"""Thin htmx views: one view serves the full page and its fragment; roles are checked on
the server by `role_required`; reads come from `selectors`, writes from `services`, and
what the views of several apps share (roles, page rendering, redirects) from `web`."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from leaseboard.core.services import alerts as alert_services
from leaseboard.core.services import leases as lease_services
from leaseboard.dashboard.selectors import alerts as alert_reads
from leaseboard.dashboard.selectors import audit as audit_reads
from leaseboard.dashboard.selectors import executor as executor_reads
from leaseboard.dashboard.selectors import live as live_reads
from leaseboard.dashboard.selectors import work_item as work_item_reads
from leaseboard.domain.errors import LeaseboardError, NotFound
from leaseboard.web.htmx import page_or_fragment, polled_fragment, wants_fragment
from leaseboard.web.pages import alert_badge_count, render_page
from leaseboard.web.redirects import redirect_next
from leaseboard.web.refusals import WHO_YOU_ARE, refuse
from leaseboard.web.roles import (
    APPROVER,
    MANAGER,
    OPERATOR,
    VIEWER_ROLES,
    acting,
    role_required,
    user_roles,
)


@require_GET
@role_required(*VIEWER_ROLES)
def live_leases(request: HttpRequest) -> HttpResponse:
    filters = live_reads.LiveFilters.from_query(request.GET)
    page = live_reads.live_leases(filters)
    if wants_fragment(request, "live"):
        # The rows' actions (takeover link, bulk pick) depend on the roles, here as on
        # the full page; role_required has already read them for this request.
        context = {"page": page, "roles": user_roles(request)}
        return polled_fragment(
            request, "dashboard/_live.html", context, version=page.version, seq=page.now_ms
        )
    context = {
        "page": page,
        "queues": [],
        "certainty_choices": live_reads.CERTAINTY_FILTERS,
        "page_sizes": live_reads.PAGE_SIZES,
    }
    return page_or_fragment(render_page(request, "dashboard/live.html", context))


@require_GET
@role_required(*VIEWER_ROLES)
def alert_badge(request: HttpRequest) -> HttpResponse:
    count = alert_badge_count()
    response = render(request, "dashboard/_badge.html", {"alert_badge": count})
    return page_or_fragment(response)


@require_GET
@role_required(*VIEWER_ROLES)
def alerts(request: HttpRequest) -> HttpResponse:
    page = alert_reads.alerts_list(
        show=request.GET.get("show", "open"), cursor=request.GET.get("cursor", "")
    )
    return page_or_fragment(render_page(request, "dashboard/alerts.html", {"page": page}))


@require_POST
@role_required(OPERATOR)
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
    if request.htmx:
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


@require_GET
@role_required(*VIEWER_ROLES)
def work_item(request: HttpRequest, key: str) -> HttpResponse:
    page = work_item_reads.work_item_page(key=key, lease_id=request.GET.get("lease", ""))
    if page is None:
        raise Http404("no such work item")
    return page_or_fragment(render_page(request, "dashboard/work_item.html", {"page": page}))


@require_POST
@role_required(OPERATOR, APPROVER)
def lease_revoke(request: HttpRequest, lease_id: uuid.UUID) -> HttpResponse:
    """Revoke an agent's lease with a reason; the work item returns to the pool."""
    try:
        lease = lease_services.lease_revoke(
            lease_id=lease_id, reason=request.POST.get("reason", ""), **acting(request)
        )
    except NotFound:
        raise Http404("no such lease") from None
    except LeaseboardError as exc:
        refuse(request, exc, prefix="Revoke: ")
        return redirect_next(request, reverse("dashboard:live"))
    messages.success(request, f"Lease at epoch {lease.epoch} revoked.")
    return redirect_next(request, reverse("dashboard:work_item", args=[lease.work_item.key]))


@require_GET
@role_required(*VIEWER_ROLES)
def executor(request: HttpRequest, pk: int) -> HttpResponse:
    page = executor_reads.executor_page(executor_id=pk)
    if page is None:
        raise Http404("no such executor")
    return page_or_fragment(render_page(request, "dashboard/executor.html", {"page": page}))


@require_GET
@role_required(MANAGER)
def audit(request: HttpRequest) -> HttpResponse:
    page = audit_reads.audit_log(cursor=request.GET.get("cursor", ""))
    return page_or_fragment(render_page(request, "dashboard/audit.html", {"page": page}))
