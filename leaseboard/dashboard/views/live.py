"""The live leases page and its polled fragment."""

from __future__ import annotations

from dataclasses import replace

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from leaseboard.core.replicas import reads_from_replica
from leaseboard.dashboard.selectors import live as live_reads
from leaseboard.domain.authority import Act
from leaseboard.web.htmx import page_or_fragment, polled_fragment, wants_fragment
from leaseboard.web.pages import render_page
from leaseboard.web.roles import act_required, may, visible_queues

# The bulk acts rows are picked for.
BULK_ACTS = (Act.REVOKE, Act.REQUEST_TAKEOVER)


@require_GET
@act_required(Act.WATCH)
@reads_from_replica
def live_leases(request: HttpRequest) -> HttpResponse:
    filters = replace(
        live_reads.LiveFilters.from_query(request.GET), queues=visible_queues(request)
    )
    page = live_reads.live_leases(filters)
    if wants_fragment(request, "live"):
        # The rows' actions (takeover link, bulk pick) are the table's answers, here as
        # on the full page; act_required has already read the roles for this request.
        context = {"page": page, "can_pick": _can_pick(request)}
        return polled_fragment(
            request, "dashboard/_live.html", context, version=page.version, seq=page.now_ms
        )
    context = {
        "page": page,
        "can_pick": _can_pick(request),
        "certainty_choices": live_reads.CERTAINTY_FILTERS,
        "page_sizes": live_reads.PAGE_SIZES,
        "sort_choices": live_reads.SORT_CHOICES,
    }
    return page_or_fragment(render_page(request, "dashboard/live.html", context))


def _can_pick(request: HttpRequest) -> bool:
    return any(may(request, act) for act in BULK_ACTS)
