"""The work item page."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from leaseboard.core.replicas import reads_from_replica
from leaseboard.dashboard.forms import ReasonForm
from leaseboard.dashboard.selectors import work_item as work_item_reads
from leaseboard.domain.authority import Act
from leaseboard.web.htmx import page_or_fragment
from leaseboard.web.kept import kept_input
from leaseboard.web.pages import render_page
from leaseboard.web.roles import act_required


@require_GET
@act_required(Act.WATCH)
@reads_from_replica
def work_item(request: HttpRequest, key: str) -> HttpResponse:
    page = work_item_reads.work_item_page(key=key, lease_id=request.GET.get("lease", ""))
    if page is None:
        raise Http404("no such work item")
    # After a refusal, the forms show again what was typed (leaseboard.web.kept).
    live = str(page.live.lease.id) if page.live else ""
    context = {
        "page": page,
        "revoke_form": ReasonForm(
            initial=kept_input(request, f"revoke:{live}"), auto_id="revoke-%s"
        ),
        "hold_form": ReasonForm(initial=kept_input(request, f"hold:{live}"), auto_id="hold-%s"),
        "kept_checkpoint": kept_input(request, f"checkpoint:{live}"),
        "checkpoint_max_kb": settings.LEASEBOARD_MAX_CHECKPOINT_BYTES // 1024,
        "kept_release": kept_input(request, f"hold_release:{page.leases[0].lease.id}")
        if page.leases
        else {},
    }
    return page_or_fragment(render_page(request, "dashboard/work_item.html", context))
