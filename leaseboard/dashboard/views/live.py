"""The live leases page and its polled fragment."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from leaseboard.core.replicas import reads_from_replica
from leaseboard.dashboard.selectors import live as live_reads
from leaseboard.web.htmx import page_or_fragment, polled_fragment, wants_fragment
from leaseboard.web.pages import render_page
from leaseboard.web.roles import APPROVER, OPERATOR, VIEWER_ROLES, role_required, user_roles

# Who picks rows for a bulk act: operators (takeover, revoke) and approvers (revoke).
PICKERS = frozenset({OPERATOR, APPROVER})


@require_GET
@role_required(*VIEWER_ROLES)
@reads_from_replica
def live_leases(request: HttpRequest) -> HttpResponse:
    filters = live_reads.LiveFilters.from_query(request.GET)
    page = live_reads.live_leases(filters)
    if wants_fragment(request, "live"):
        # The rows' actions (takeover link, bulk pick) depend on the roles, here as on
        # the full page; role_required has already read them for this request.
        roles = user_roles(request)
        context = {"page": page, "roles": roles, "can_pick": bool(roles & PICKERS)}
        return polled_fragment(
            request, "dashboard/_live.html", context, version=page.version, seq=page.now_ms
        )
    context = {
        "page": page,
        "can_pick": bool(user_roles(request) & PICKERS),
        "certainty_choices": live_reads.CERTAINTY_FILTERS,
        "page_sizes": live_reads.PAGE_SIZES,
        "sort_choices": live_reads.SORT_CHOICES,
    }
    return page_or_fragment(render_page(request, "dashboard/live.html", context))
