"""Acknowledge by query: every open, unacknowledged alert the alerts page's filters match,
counted first, confirmed with one note, answered with an outcome per alert. The alerts
page itself (grouping, one-by-one acknowledgement) is dashboard.views.alerts."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_http_methods

from leaseboard.core.services import alerts_bulk
from leaseboard.dashboard.selectors.alerts_matching import alerts_matching
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import LeaseboardError
from leaseboard.web.pages import render_bulk_page
from leaseboard.web.refusals import refused_for_form
from leaseboard.web.roles import act_required, acting


@require_http_methods(["GET", "POST"])
@act_required(Act.ACKNOWLEDGE_ALERT)
def alerts_acknowledge_bulk(request: HttpRequest) -> HttpResponse:
    """GET: the matching alerts, counted (the server evaluates the filter). POST: acknowledge
    the ticked ones with the note; after an error the note and the ticks are kept."""
    matching = alerts_matching(request.GET)
    picked = request.POST.getlist("alert") if request.method == "POST" else []
    note = request.POST.get("note", "") if request.method == "POST" else ""
    bulk, error = None, ""
    if request.method == "POST":
        try:
            bulk = alerts_bulk.alerts_acknowledge_bulk(
                alert_ids=picked, note=note, query=matching.query, **acting(request)
            )
        except LeaseboardError as exc:
            error = refused_for_form(exc)
    context = {"matching": matching, "note": note, "error": error}
    return render_bulk_page(
        request, "dashboard/acknowledge_bulk.html", context, picked=picked, bulk=bulk
    )
