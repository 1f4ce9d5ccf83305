"""An operator asks to take a work item over (or, as its own danger action, breaks glass),
alone or in bulk. The request page shows what the operator is about to interrupt."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods

from leaseboard.domain.authority import Act
from leaseboard.domain.errors import LeaseboardError
from leaseboard.domain.text import storable
from leaseboard.domain.vocabulary import ReasonCategory
from leaseboard.takeovers import services
from leaseboard.takeovers.forms import BulkRequestForm, TakeoverRequestForm
from leaseboard.takeovers.selectors.requests import request_context
from leaseboard.web.pages import render_page
from leaseboard.web.refusals import refused_for_form
from leaseboard.web.roles import act_required, acting, may


@require_http_methods(["GET", "POST"])
@act_required(Act.REQUEST_TAKEOVER)
def request_takeover(request: HttpRequest, key: str) -> HttpResponse:
    if not storable(key):  # a NUL names no stored key, and PostgreSQL refuses the lookup
        raise Http404("no such work item")
    context = request_context(key=key)
    if context is None:
        raise Http404("no such work item")
    can_break_glass = may(request, Act.BREAK_GLASS)
    initial = {**_asked_for(request), **_escalated_hold(context.item)}
    form = TakeoverRequestForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        args = {
            "work_key": key,
            "reason_category": d["reason_category"],
            "reason_text": d["reason_text"],
            "standing_ms": d["standing_minutes"] * 60_000,
            "grantee_agent": d["agent"].strip() or None,
            "grantee_operator": d["grantee_operator"].strip() or None,
            **acting(request),
        }
        try:
            # Break-glass is its own button (a danger action with a confirmation).
            if request.POST.get("break_glass") == "on":
                iv = services.takeover_break_glass(**args)
                messages.success(
                    request,
                    f"Break-glass takeover of {key}: standing at epoch "
                    f"{iv.epoch}. It is flagged for review.",
                )
                return redirect("takeovers:standing")
            req = services.takeover_request(**args, hold_while_waiting=d["hold_while_waiting"])
        except LeaseboardError as exc:
            form.add_error(None, refused_for_form(exc))
        else:
            messages.success(request, f"Takeover #{req.id} of {key} is waiting for an approver.")
            return redirect("dashboard:work_item", key=key)
    status = 400 if request.method == "POST" else 200
    return render_page(
        request,
        "takeovers/request.html",
        {"ctx": context, "item": context.item, "form": form, "can_break_glass": can_break_glass},
        status,
    )


@require_http_methods(["GET", "POST"])
@act_required(Act.REQUEST_TAKEOVER)
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
    status = 400 if request.method == "POST" and bulk is None else 200
    return render_page(request, "takeovers/bulk.html", {"form": form, "bulk": bulk}, status)


def _asked_for(request: HttpRequest) -> dict[str, str]:
    """A link may start the form with a reason category ("Take over to reconcile" on the
    blocked-work page starts from effects with unknown outcome)."""
    category = request.GET.get("reason_category", "")
    if category not in {c.value for c in ReasonCategory}:
        return {}
    if category == ReasonCategory.UNKNOWN_OUTCOME:
        return {
            "reason_category": category,
            "reason_text": "reconcile the effects with no known outcome",
        }
    return {"reason_category": category}


def _escalated_hold(item: Any) -> dict[str, str]:
    """Escalating a hold to a takeover: the request starts from the hold's reason (the work
    item's, live lease or not)."""
    if item is None or item.held_at_ms is None:
        return {}
    category, _, text = item.hold_reason.partition(": ")
    if category not in {c.value for c in ReasonCategory} or not text:
        return {"reason_text": f"escalated from hold: {item.hold_reason}"[:1000]}
    return {"reason_category": category, "reason_text": f"escalated from hold: {text}"[:1000]}
