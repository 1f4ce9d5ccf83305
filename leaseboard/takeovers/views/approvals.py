"""The approver's page and decisions: takeover requests and effects awaiting approval."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from leaseboard.core.services import approvals
from leaseboard.domain.errors import LeaseboardError
from leaseboard.takeovers import services
from leaseboard.takeovers.selectors.approvals import pending_effects, pending_requests
from leaseboard.web.pages import render_page
from leaseboard.web.refusals import refuse
from leaseboard.web.roles import APPROVER, acting, role_required


@require_GET
@role_required(APPROVER)
def pending(request: HttpRequest) -> HttpResponse:
    return render_page(
        request,
        "takeovers/pending.html",
        {
            "requests": pending_requests(),
            "effects": pending_effects(),
        },
    )


@require_POST
@role_required(APPROVER)
def request_decide(request: HttpRequest, pk: int, decision: str) -> HttpResponse:
    if decision not in ("approve", "reject"):
        raise Http404("no such decision")
    note = request.POST.get("note", "")
    try:
        if decision == "approve":
            iv = services.takeover_approve(request_pk=pk, note=note, **acting(request))
            messages.success(request, f"Takeover #{pk} approved: epoch {iv.epoch}.")
        else:
            services.takeover_reject(request_pk=pk, note=note, **acting(request))
            messages.success(request, f"Takeover #{pk} rejected.")
    except LeaseboardError as exc:
        refuse(request, exc, prefix=f"Takeover #{pk}: ")
    return redirect("takeovers:pending")


@require_POST
@role_required(APPROVER)
def effect_decide(request: HttpRequest, effect_id: uuid.UUID, decision: str) -> HttpResponse:
    if decision not in ("approve", "reject"):
        raise Http404("no such decision")
    note = request.POST.get("note", "")
    try:
        if decision == "approve":
            approvals.effect_approve(effect_id=effect_id, note=note, **acting(request))
            messages.success(request, "Effect authorized.")
        else:
            approvals.effect_reject(effect_id=effect_id, note=note, **acting(request))
            messages.success(request, "Effect rejected.")
    except LeaseboardError as exc:
        refuse(request, exc, prefix="Effect: ")
    return redirect("takeovers:pending")
