"""An operator (or approver) revokes an agent's lease with a structured reason, or several
leases with one reason: picked on the live page, confirmed on a page that lists them,
answered with an outcome per lease."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from leaseboard.core.models import Lease
from leaseboard.core.services import leases as lease_services
from leaseboard.core.services import supervision
from leaseboard.dashboard.forms import BulkRevokeForm
from leaseboard.dashboard.selectors import revocations as revoke_reads
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import LeaseboardError, NotFound
from leaseboard.web.kept import keep_input
from leaseboard.web.pages import render_page
from leaseboard.web.params import REASON_FIELDS, reason_posted
from leaseboard.web.redirects import redirect_next
from leaseboard.web.refusals import refuse, refused_for_form
from leaseboard.web.roles import act_required, acting


def lease_acted(
    request: HttpRequest,
    act: Callable[[], Lease],
    *,
    kept: tuple[str, tuple[str, ...]],
    prefix: str,
    done: Callable[[Lease], str],
) -> HttpResponse:
    """One operator act on one lease (revoke, hold, release): an unknown lease is a 404; a
    refusal goes back to the live page with the typed input kept (`kept`: the form's key
    and fields); done, `done(lease)` is said on the work item's page."""
    try:
        lease = act()
    except NotFound:
        raise Http404("no such lease") from None
    except LeaseboardError as exc:
        keep_input(request, *kept)
        refuse(request, exc, prefix=prefix)
        return redirect_next(request, reverse("dashboard:live"))
    messages.success(request, done(lease))
    return redirect_next(request, reverse("dashboard:work_item", args=[lease.work_item.key]))


# deliberate: one decorated view per act, as holds.py's; the shared answer is lease_acted's.
@require_POST
@act_required(Act.REVOKE)
def lease_revoke(request: HttpRequest, lease_id: uuid.UUID) -> HttpResponse:
    """Revoke one agent's lease; the work item returns to the pool."""
    return lease_acted(
        request,
        lambda: lease_services.lease_revoke(
            lease_id=lease_id, **reason_posted(request), **acting(request)
        ),
        kept=(f"revoke:{lease_id}", REASON_FIELDS),
        prefix="Revoke: ",
        done=lambda lease: (
            f"Revoked {lease.holder.name}'s lease at epoch {lease.epoch}; "
            "its next renew is refused with your reason."
        ),
    )


@require_http_methods(["GET", "POST"])
@act_required(Act.REVOKE)
def leases_revoke_bulk(request: HttpRequest) -> HttpResponse:
    """GET ?key=…: the live leases of the picked work items, to confirm; GET ?match=1&…:
    every agent's live lease the live page's filters match, counted first. POST: revoke
    the ones still ticked, with one reason and the form's idempotency key."""
    form = BulkRevokeForm(request.POST or None, initial={"idempotency_key": uuid.uuid4().hex})
    picked = request.POST.getlist("lease") if request.method == "POST" else []
    bulk = None
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            # deliberate: the form's fields by name, one a line; alike in shape only.
            bulk = supervision.leases_revoke_bulk(
                lease_ids=picked,
                reason_category=d["reason_category"],
                reason_text=d["reason_text"],
                idempotency_key=d["idempotency_key"],
                **acting(request),
            )
        except LeaseboardError as exc:
            form.add_error(None, refused_for_form(exc))
    matching = None
    if bulk:
        rows = []
    elif request.GET.get("match") == "1":  # "select all N matching this filter"
        matching = revoke_reads.leases_matching(request.GET)
        rows = matching.rows
    else:
        rows = revoke_reads.leases_to_revoke(keys=request.GET.getlist("key"))
    context = {
        "form": form,
        "rows": rows,
        "matching": matching,
        "picked": set(picked),
        "bulk": bulk,
        "succeeded": sum(1 for r in bulk.results if r["ok"]) if bulk else 0,
    }
    status = 400 if request.method == "POST" and bulk is None else 200
    return render_page(request, "dashboard/revoke_bulk.html", context, status)
