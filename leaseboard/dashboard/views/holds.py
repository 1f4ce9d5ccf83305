"""An operator (or approver) puts an agent's lease on hold with a structured reason, or
releases the hold; or holds every agent lease a live-page filter matches ("hold all N
matching this filter": counted first, confirmed, an outcome per lease). Escalating a hold
is a takeover request, started from the hold's reason (takeovers:request)."""

from __future__ import annotations

import uuid

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_http_methods, require_POST

from leaseboard.core.services import holds
from leaseboard.dashboard.forms import ReasonForm
from leaseboard.dashboard.selectors import revocations as lease_reads
from leaseboard.dashboard.views.revocations import lease_acted
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import LeaseboardError
from leaseboard.web.pages import render_bulk_page
from leaseboard.web.params import REASON_FIELDS, reason_posted
from leaseboard.web.refusals import refused_for_form
from leaseboard.web.roles import act_required, acting


# deliberate: one decorated view per act (Django's declarative shape); each passes its own
# service, kept fields and words to lease_acted (revocations.py), which answers them all.
@require_POST
@act_required(Act.HOLD)
def lease_hold(request: HttpRequest, lease_id: uuid.UUID) -> HttpResponse:
    """Hold: renewals go on, new effects are refused on_hold."""
    return lease_acted(
        request,
        lambda: holds.lease_hold(lease_id=lease_id, **reason_posted(request), **acting(request)),
        kept=(f"hold:{lease_id}", REASON_FIELDS),
        prefix="Hold: ",
        done=lambda lease: (
            f"{lease.holder.name}'s lease at epoch {lease.epoch} is on hold: it keeps renewing, "
            "and its new effects are refused (on_hold) until you release the hold."
        ),
    )


@require_POST
@act_required(Act.RELEASE_HOLD)
def lease_hold_release(request: HttpRequest, lease_id: uuid.UUID) -> HttpResponse:
    return lease_acted(
        request,
        lambda: holds.lease_hold_release(
            lease_id=lease_id, note=request.POST.get("note", ""), **acting(request)
        ),
        kept=(f"hold_release:{lease_id}", ("note",)),
        prefix="Release hold: ",
        done=lambda lease: f"Hold released: {lease.holder.name} may propose effects again.",
    )


@require_http_methods(["GET", "POST"])
@act_required(Act.HOLD)
def leases_hold_bulk(request: HttpRequest) -> HttpResponse:
    """GET: every agent lease the live page's filters match and not on hold yet, counted
    first (the server evaluates the filter). POST: hold the ones still ticked, with one
    reason; an outcome per lease. After an error the page keeps what was typed and ticked."""
    form = ReasonForm(request.POST or None, auto_id="hold-%s")
    picked = request.POST.getlist("lease") if request.method == "POST" else []
    matching = lease_reads.leases_matching(request.GET, unheld=True)
    bulk = None
    if request.method == "POST" and form.is_valid():
        try:
            bulk = holds.leases_hold_bulk(
                lease_ids=picked,
                reason_category=form.cleaned_data["reason_category"],
                reason_text=form.cleaned_data["reason_text"],
                query=matching.query,
                **acting(request),
            )
        except LeaseboardError as exc:
            form.add_error(None, refused_for_form(exc))
    context = {"form": form, "matching": matching, "rows": matching.rows}
    return render_bulk_page(request, "dashboard/hold_bulk.html", context, picked=picked, bulk=bulk)
