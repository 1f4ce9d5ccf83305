"""The blocked-work page: items no one may advance until their effects are reconciled."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from leaseboard.dashboard.selectors import blocked as blocked_reads
from leaseboard.domain.authority import Act
from leaseboard.web.pages import render_page
from leaseboard.web.roles import act_required


@require_GET
@act_required(Act.WATCH)
def blocked(request: HttpRequest) -> HttpResponse:
    filters = blocked_reads.BlockedFilters.from_query(request.GET)
    page = blocked_reads.blocked_items(filters)
    return render_page(request, "dashboard/blocked.html", {"page": page})
