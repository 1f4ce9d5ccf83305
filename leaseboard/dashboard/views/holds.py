"""An operator (or approver) puts an agent's lease on hold with a structured reason, or
releases the hold. Escalating a hold is a takeover request, started from the hold's reason
(takeovers:request)."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from leaseboard.core.services import holds
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import LeaseboardError, NotFound
from leaseboard.web.redirects import redirect_next
from leaseboard.web.refusals import refuse
from leaseboard.web.roles import act_required, acting


@require_POST
@act_required(Act.HOLD)
def lease_hold(request: HttpRequest, lease_id: uuid.UUID) -> HttpResponse:
    """Hold: renewals go on, new effects are refused on_hold."""
    try:
        lease = holds.lease_hold(
            lease_id=lease_id,
            reason_category=request.POST.get("reason_category", ""),
            reason_text=request.POST.get("reason_text", ""),
            **acting(request),
        )
    except NotFound:
        raise Http404("no such lease") from None
    except LeaseboardError as exc:
        refuse(request, exc, prefix="Hold: ")
        return redirect_next(request, reverse("dashboard:live"))
    messages.success(
        request,
        f"{lease.holder.name}'s lease at epoch {lease.epoch} is on hold: it keeps renewing, "
        "and its new effects are refused (on_hold) until you release the hold.",
    )
    return redirect_next(request, reverse("dashboard:work_item", args=[lease.work_item.key]))


@require_POST
@act_required(Act.RELEASE_HOLD)
def lease_hold_release(request: HttpRequest, lease_id: uuid.UUID) -> HttpResponse:
    try:
        lease = holds.lease_hold_release(
            lease_id=lease_id, note=request.POST.get("note", ""), **acting(request)
        )
    except NotFound:
        raise Http404("no such lease") from None
    except LeaseboardError as exc:
        refuse(request, exc, prefix="Release hold: ")
        return redirect_next(request, reverse("dashboard:live"))
    messages.success(request, f"Hold released: {lease.holder.name} may propose effects again.")
    return redirect_next(request, reverse("dashboard:work_item", args=[lease.work_item.key]))
