"""Thin htmx views: one view serves the full page and its fragment; roles are checked on
the server by `role_required`; reads come from `selectors`, writes from `services`."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from leaseboard.core.authority import Actor
from leaseboard.core.services.alerts import alert_acknowledge as alert_acknowledge_service
from leaseboard.dashboard import selectors
from leaseboard.dashboard.roles import (
    OPERATOR,
    VIEWER_ROLES,
    has_role,
    request_id,
    role_required,
    user_roles,
)
from leaseboard.domain.errors import LeaseboardError, NotFound

VERSION_HEADER = "X-Leaseboard-Version"
SEQ_HEADER = "X-Leaseboard-Seq"


def _page(request: HttpRequest, template: str, context: dict[str, Any], status: int = 200):
    """Render a full page with what the header needs on every page (badge, roles)."""
    context.setdefault("alert_badge", selectors.alert_badge_count())
    context["roles"] = user_roles(request)
    context["can_acknowledge"] = has_role(request, OPERATOR)
    return render(request, template, context, status=status)


def _no_store(response: HttpResponse) -> HttpResponse:
    response["Cache-Control"] = "no-store"
    response["Vary"] = "HX-Request, HX-Target"
    return response


@require_GET
@role_required(*VIEWER_ROLES)
def live_leases(request: HttpRequest) -> HttpResponse:
    filters = selectors.LiveFilters.from_query(request.GET)
    if request.htmx and request.htmx.target == "live":
        page = selectors.live_leases(filters)
        if request.headers.get(VERSION_HEADER) == page.version:
            response = HttpResponse(status=304)
        else:
            # The rows' actions (takeover link, bulk pick) depend on the roles, here as on
            # the full page; role_required has already read them for this request.
            context = {"page": page, "roles": user_roles(request)}
            response = render(request, "dashboard/_live.html", context)
        response[VERSION_HEADER] = page.version
        response[SEQ_HEADER] = str(page.now_ms)
        return _no_store(response)
    page = selectors.live_leases(filters)
    context = {
        "page": page,
        "queues": [],
        "certainty_choices": selectors.CERTAINTY_FILTERS,
        "page_sizes": selectors.PAGE_SIZES,
    }
    return _no_store(_page(request, "dashboard/live.html", context))


@require_GET
@role_required(*VIEWER_ROLES)
def alert_badge(request: HttpRequest) -> HttpResponse:
    count = selectors.alert_badge_count()
    response = render(request, "dashboard/_badge.html", {"alert_badge": count})
    return _no_store(response)


@require_GET
@role_required(*VIEWER_ROLES)
def alerts(request: HttpRequest) -> HttpResponse:
    page = selectors.alerts_list(
        show=request.GET.get("show", "open"), cursor=request.GET.get("cursor", "")
    )
    return _no_store(_page(request, "dashboard/alerts.html", {"page": page}))


@require_POST
@role_required(OPERATOR)
def alert_acknowledge(request: HttpRequest, pk: int) -> HttpResponse:
    note = request.POST.get("note", "")
    error = ""
    try:
        ack = alert_acknowledge_service(
            alert_id=pk,
            actor=Actor.human(request.user),
            note=note,
            request_id=request_id(request),
        )
        alert = ack.alert
    except NotFound:
        raise Http404("no such alert") from None
    except LeaseboardError as exc:
        error = exc.detail
        alert = None
    if request.htmx:
        if alert is None:
            page_alert = selectors.alert_for_row(pk)
            if page_alert is None:
                raise Http404("no such alert")
            alert = page_alert
        context = {"alert": alert, "error": error, "note": note, "can_acknowledge": True}
        return _no_store(render(request, "dashboard/_alert_row.html", context))
    if error:
        messages.error(request, f"Alert {pk}: {error}")
    else:
        messages.success(request, f"Alert {pk} acknowledged.")
    return redirect(request.POST.get("next") or reverse("dashboard:alerts"))


@require_GET
@role_required(*VIEWER_ROLES)
def work_item(request: HttpRequest, key: str) -> HttpResponse:
    page = selectors.work_item_page(key=key, lease_id=request.GET.get("lease", ""))
    if page is None:
        raise Http404("no such work item")
    return _no_store(_page(request, "dashboard/work_item.html", {"page": page}))


@require_GET
@role_required(*VIEWER_ROLES)
def executor(request: HttpRequest, pk: int) -> HttpResponse:
    page = selectors.executor_page(executor_id=pk)
    if page is None:
        raise Http404("no such executor")
    return _no_store(_page(request, "dashboard/executor.html", {"page": page}))


@require_GET
@role_required("manager")
def audit(request: HttpRequest) -> HttpResponse:
    page = selectors.audit_log(cursor=request.GET.get("cursor", ""))
    return _no_store(_page(request, "dashboard/audit.html", {"page": page}))
