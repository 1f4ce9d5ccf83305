"""The alerts page, the header's alert badge, and acknowledging an alert."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from leaseboard.core.services import alerts as alert_services
from leaseboard.dashboard.selectors import alerts as alert_reads
from leaseboard.domain.errors import LeaseboardError, NotFound
from leaseboard.web.htmx import page_or_fragment
from leaseboard.web.pages import alert_badge_count, render_page
from leaseboard.web.redirects import redirect_next
from leaseboard.web.refusals import WHO_YOU_ARE
from leaseboard.web.roles import OPERATOR, VIEWER_ROLES, acting, role_required


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
