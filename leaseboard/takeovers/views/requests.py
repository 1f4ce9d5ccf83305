"""An operator asks to take a work item over (or breaks glass), alone or in bulk."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods

from leaseboard.core.models import WorkItem
from leaseboard.domain.errors import LeaseboardError
from leaseboard.domain.text import storable
from leaseboard.takeovers import services
from leaseboard.takeovers.forms import BulkRequestForm, TakeoverRequestForm
from leaseboard.web.pages import render_page
from leaseboard.web.refusals import refused_for_form
from leaseboard.web.roles import OPERATOR, acting, role_required


@require_http_methods(["GET", "POST"])
@role_required(OPERATOR)
def request_takeover(request: HttpRequest, key: str) -> HttpResponse:
    if not storable(key):  # a NUL names no stored key, and PostgreSQL refuses the lookup
        raise Http404("no such work item")
    item = WorkItem.objects.select_related("queue").filter(key=key).first()
    if item is None:
        raise Http404("no such work item")
    can_break_glass = request.user.has_perm("takeovers.break_glass")
    form = TakeoverRequestForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        args = {
            "work_key": key,
            "reason_category": d["reason_category"],
            "reason_text": d["reason_text"],
            "standing_ms": d["standing_minutes"] * 60_000,
            "grantee_agent": d["agent"].strip() or None,
            **acting(request),
        }
        try:
            if d["break_glass"]:
                iv = services.takeover_break_glass(**args)
                messages.success(
                    request,
                    f"Break-glass takeover of {key}: standing at epoch "
                    f"{iv.epoch}. It is flagged for review.",
                )
                return redirect("takeovers:standing")
            req = services.takeover_request(**args)
        except LeaseboardError as exc:
            form.add_error(None, refused_for_form(exc))
        else:
            messages.success(request, f"Takeover #{req.id} of {key} is waiting for an approver.")
            return redirect("dashboard:work_item", key=key)
    status = 400 if request.method == "POST" else 200
    return render_page(
        request,
        "takeovers/request.html",
        {"item": item, "form": form, "can_break_glass": can_break_glass},
        status,
    )


@require_http_methods(["GET", "POST"])
@role_required(OPERATOR)
def bulk_request(request: HttpRequest) -> HttpResponse:
    initial = {
        "idempotency_key": uuid.uuid4().hex,
        "work_keys": "\n".join(request.GET.getlist("key")),
    }
    form = BulkRequestForm(request.POST or None, initial=initial)
    bulk = None
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            bulk = services.takeover_bulk_request(
                work_keys=d["work_keys"].split(),
                reason_category=d["reason_category"],
                reason_text=d["reason_text"],
                idempotency_key=d["idempotency_key"],
                **acting(request),
            )
        except LeaseboardError as exc:
            form.add_error(None, refused_for_form(exc))
    return render_page(request, "takeovers/bulk.html", {"form": form, "bulk": bulk})
