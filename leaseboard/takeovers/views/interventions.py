"""The manager's intervention records: list with filters, summary, CSV export, one
record's timeline, and the review of a break-glass takeover."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from leaseboard.core.replicas import reads_from_replica
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import LeaseboardError
from leaseboard.takeovers import services
from leaseboard.takeovers.models import Intervention, ReasonCategory
from leaseboard.takeovers.selectors import records, summary, timeline
from leaseboard.web import charts
from leaseboard.web.csv_export import csv_download
from leaseboard.web.pages import render_page
from leaseboard.web.refusals import refuse
from leaseboard.web.roles import act_required, acting
from leaseboard.web.templatetags.web import ms_iso, reason_label


@require_GET
@act_required(Act.REVIEW_INTERVENTION)
@reads_from_replica
def interventions(request: HttpRequest) -> HttpResponse:
    filters = records.InterventionFilters.from_query(request.GET)
    return render_page(
        request,
        "takeovers/interventions.html",
        {
            "page": records.interventions_list(filters),
            "unreviewed": records.unreviewed_break_glass_count(),
            "reasons": ReasonCategory.choices,
            "outcomes": Intervention.Outcome.values,
        },
    )


@require_GET
@act_required(Act.REVIEW_INTERVENTION)
@reads_from_replica
def interventions_summary(request: HttpRequest) -> HttpResponse:
    filters = records.InterventionFilters.from_query(request.GET)
    pics = summary.pictures(filters, request.GET.get("range", "30d"))
    labels = [charts.ago_label(pics.now_ms - start) for start in pics.starts]
    per = charts.per_label(pics.starts[1] - pics.starts[0]) if len(pics.starts) > 1 else ""
    reason_total = {r: sum(v) for r, v in pics.by_reason.items()}
    context = {
        "summary": summary.summary(filters),
        "filters": filters,
        "ranges": summary.RANGE_LABELS,
        "range": pics.range,
        "base": filters.query().lstrip("?"),
        "reason_chart": charts.bars(
            f"Interventions by reason, per {per}",
            "Interventions in the range by reason: "
            + ("; ".join(f"{reason_label(r)}: {n}" for r, n in reason_total.items()) or "none")
            + ".",
            labels,
            [
                charts.Series(reason_label(r), [float(v) for v in pics.by_reason[r]])
                for r in pics.reasons
            ],
        ),
        "agent_chart": charts.bars(
            "Interventions by agent (the most taken over)",
            "Interventions in the range by agent: "
            + ("; ".join(f"{a}: {n}" for a, n in pics.agents) or "none")
            + ".",
            [a for a, _ in pics.agents] or ["none"],
            [charts.Series("interventions", [float(n) for _, n in pics.agents] or [0.0])],
            max_x_labels=8,
        ),
        "decision_chart": charts.counts_bars(
            "Time from request to decision (approved, not break-glass)",
            "Approved takeovers by the time their decision took",
            pics.decision_times,
            name="takeovers",
        ),
    }
    return render_page(request, "takeovers/summary.html", context)


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
    "requested_at",
    "decided_at",
    "request_to_decision_ms",
    "outcome",
    "ended_at",
]


@require_GET
@act_required(Act.REVIEW_INTERVENTION)
@reads_from_replica
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
            "" if iv.break_glass else iv.approved_by.username,
            iv.break_glass,
            iv.reviewed_by.username if iv.reviewed_by else "",
            iv.agent.name if iv.agent else "",
            iv.epoch - 1,
            iv.grantee.name,
            iv.epoch,
            ms_iso(iv.requested_at_ms),
            ms_iso(iv.decided_at_ms),
            "" if iv.break_glass else iv.decided_at_ms - iv.requested_at_ms,
            iv.outcome,
            ms_iso(iv.ended_at_ms),
        )
        for iv in records.interventions_for_export(filters)
    )
    return csv_download("interventions.csv", CSV_HEADER, rows)


@require_GET
@act_required(Act.REVIEW_INTERVENTION)
@reads_from_replica
def intervention_detail(request: HttpRequest, pk: int) -> HttpResponse:
    detail = timeline.intervention_detail(pk)
    if detail is None:
        raise Http404("no such intervention")
    return render_page(request, "takeovers/intervention.html", {"d": detail})


@require_POST
@act_required(Act.REVIEW_INTERVENTION)
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
