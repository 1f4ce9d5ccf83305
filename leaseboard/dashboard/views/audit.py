"""The audit log (managers): filters, pages, names instead of ids."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from leaseboard.core.replicas import reads_from_replica
from leaseboard.dashboard.selectors import audit as audit_reads
from leaseboard.domain.authority import Act
from leaseboard.web.htmx import page_or_fragment
from leaseboard.web.pages import render_page
from leaseboard.web.roles import act_required


@require_GET
@act_required(Act.READ_AUDIT)
@reads_from_replica
def audit(request: HttpRequest) -> HttpResponse:
    page = audit_reads.audit_log(audit_reads.AuditFilters.from_query(request.GET))
    context = {"page": page, "f": page.filters, "action_hints": audit_reads.ACTION_HINTS}
    return page_or_fragment(render_page(request, "dashboard/audit.html", context))
