"""The manager's intervention records: list with filters, summary, CSV export, one
record's timeline, and the review of a break-glass takeover."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from leaseboard.domain.errors import LeaseboardError
from leaseboard.takeovers import services
from leaseboard.takeovers.models import Intervention, ReasonCategory
from leaseboard.takeovers.selectors import records, summary, timeline
from leaseboard.web.csv_export import csv_download
from leaseboard.web.pages import render_page
from leaseboard.web.refusals import refuse
from leaseboard.web.roles import MANAGER, acting, role_required


@require_GET
@role_required(MANAGER)
def interventions(request: HttpRequest) -> HttpResponse:
    filters = records.InterventionFilters.from_query(request.GET)
    return render_page(
        request,
        "takeovers/interventions.html",
        {
            "page": records.interventions_list(filters),
            "reasons": ReasonCategory.choices,
            "outcomes": Intervention.Outcome.values,
        },
    )


@require_GET
@role_required(MANAGER)
def interventions_summary(request: HttpRequest) -> HttpResponse:
    filters = records.InterventionFilters.from_query(request.GET)
    return render_page(
        request,
        "takeovers/summary.html",
        {"summary": summary.summary(filters), "filters": filters},
    )


CSV_HEADER = [
    "id",
    "work_key",
    "queue",
    "reason_category",
    "reason",
    "requested_by",
    "approved_by",
    "break_glass",
    "reviewed_by",
    "agent",
    "revoked_epoch",
    "grantee",
    "standing_epoch",
    "requested_at_ms",
    "decided_at_ms",
    "request_to_decision_ms",
    "outcome",
    "ended_at_ms",
]


@require_GET
@role_required(MANAGER)
def interventions_csv(request: HttpRequest) -> StreamingHttpResponse:
    filters = records.InterventionFilters.from_query(request.GET)
    rows = (
        (
            iv.id,
            iv.work_item.key,
            iv.queue.name,
            iv.reason_category,
            iv.reason_text,
            iv.requested_by.username,
            iv.approved_by.username,
            iv.break_glass,
            iv.reviewed_by_id or "",
            iv.agent.name if iv.agent else "",
            iv.epoch - 1,
            iv.grantee.name,
            iv.epoch,
            iv.requested_at_ms,
            iv.decided_at_ms,
            iv.decided_at_ms - iv.requested_at_ms,
            iv.outcome,
            iv.ended_at_ms,
        )
        for iv in records.interventions_for_export(filters)
    )
    return csv_download("interventions.csv", CSV_HEADER, rows)


@require_GET
@role_required(MANAGER)
def intervention_detail(request: HttpRequest, pk: int) -> HttpResponse:
    detail = timeline.intervention_detail(pk)
    if detail is None:
        raise Http404("no such intervention")
    return render_page(request, "takeovers/intervention.html", {"d": detail})


@require_POST
@role_required(MANAGER)
def intervention_review(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        services.intervention_review(
            intervention_pk=pk, note=request.POST.get("note", ""), **acting(request)
        )
    except LeaseboardError as exc:
        refuse(request, exc)
    else:
        messages.success(request, "Review recorded.")
    return redirect("takeovers:intervention", pk=pk)
