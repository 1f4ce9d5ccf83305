"""The audit log (managers)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from leaseboard.dashboard.selectors import audit as audit_reads
from leaseboard.web.htmx import page_or_fragment
from leaseboard.web.pages import render_page
from leaseboard.web.roles import MANAGER, role_required


@require_GET
@role_required(MANAGER)
def audit(request: HttpRequest) -> HttpResponse:
    page = audit_reads.audit_log(cursor=request.GET.get("cursor", ""))
    return page_or_fragment(render_page(request, "dashboard/audit.html", {"page": page}))
