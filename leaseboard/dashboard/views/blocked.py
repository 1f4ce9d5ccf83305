"""The blocked-work page: items no one may advance until their effects are reconciled."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from leaseboard.dashboard.selectors import blocked as blocked_reads
from leaseboard.web.pages import render_page
from leaseboard.web.roles import VIEWER_ROLES, role_required


@require_GET
@role_required(*VIEWER_ROLES)
def blocked(request: HttpRequest) -> HttpResponse:
    filters = blocked_reads.BlockedFilters.from_query(request.GET)
    page = blocked_reads.blocked_items(filters)
    return render_page(request, "dashboard/blocked.html", {"page": page})
