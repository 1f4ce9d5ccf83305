"""Fleet health over time: server-rendered SVG charts with a time-range picker."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from leaseboard.core.replicas import reads_from_replica
from leaseboard.dashboard.selectors import fleet as fleet_reads
from leaseboard.domain.authority import Act
from leaseboard.web import charts
from leaseboard.web.htmx import page_or_fragment
from leaseboard.web.pages import render_page
from leaseboard.web.roles import act_required


@require_GET
@act_required(Act.WATCH)
@reads_from_replica
def fleet(request: HttpRequest) -> HttpResponse:
    h = fleet_reads.fleet_health(request.GET.get("range", "1h"))
    labels = [charts.ago_label(h.now_ms - start) for start in h.starts]
    per = charts.per_label(h.bucket_ms)
    context = {
        "health": h,
        "ranges": fleet_reads.RANGE_LABELS,
        "live_chart": charts.line(
            "Live leases",
            f"Live leases at the end of each {per}: {h.live[0]} at the start of the range, "
            f"{h.live_now} now.",
            labels,
            [float(v) for v in h.live],
            name="live leases",
        ),
        "change_chart": charts.bars(
            f"Leases ended normally, entered jeopardy and expired, per {per}",
            f"{sum(h.jeopardy)} leases entered jeopardy and {sum(h.expired)} expired in the "
            f"range; {sum(h.ended)} were released or revoked.",
            labels,
            [  # stacked bottom up: the normal ends first, the faults on top
                charts.Series("released or revoked", [float(v) for v in h.ended], "normal"),
                charts.Series("entered jeopardy", [float(v) for v in h.jeopardy], "warn"),
                charts.Series("expired", [float(v) for v in h.expired], "fault"),
            ],
        ),
        "gap_chart": charts.counts_bars(
            "Largest renewal gap of live leases, as a share of their jeopardy threshold",
            "Live leases by their largest gap between renewals",
            h.gaps,
            name="live leases",
            max_x_labels=6,
        ),
    }
    return page_or_fragment(render_page(request, "dashboard/fleet.html", context))
