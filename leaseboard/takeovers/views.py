"""Thin takeover views. Roles are checked on the server by `role_required` on every view;
writes go through services, reads through selectors; a refusal is a form error or a
message, never a 500 and never a partial write."""

from __future__ import annotations

import csv
import uuid
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from leaseboard.core.authority import Actor
from leaseboard.core.models import WorkItem
from leaseboard.core.services import approvals, reconciliation
from leaseboard.dashboard.roles import (
    APPROVER,
    MANAGER,
    OPERATOR,
    acting_role,
    request_id,
    role_required,
    user_roles,
)
from leaseboard.domain.errors import Forbidden, LeaseboardError
from leaseboard.takeovers import selectors, services
from leaseboard.takeovers.forms import BulkRequestForm, TakeoverRequestForm
from leaseboard.takeovers.models import Intervention, ReasonCategory


def _page(request: HttpRequest, template: str, context: dict[str, Any], status: int = 200):
    from leaseboard.dashboard.selectors import alert_badge_count

    context.setdefault("alert_badge", alert_badge_count())
    context["roles"] = user_roles(request)
    response = render(request, template, context, status=status)
    response["Cache-Control"] = "no-store"
    return response


def _ctx(request: HttpRequest, role: str) -> dict[str, Any]:
    acting_role(request, role)  # the page's role gate; the authority decides the act
    return {"actor": Actor.human(request.user), "request_id": request_id(request)}


def _int(raw: Any) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        return -1


def _back(request: HttpRequest, default: str) -> HttpResponse:
    nxt = request.POST.get("next", "")
    return redirect(nxt if nxt.startswith("/") and not nxt.startswith("//") else default)


# --- operator ------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@role_required(OPERATOR)
def request_takeover(request: HttpRequest, key: str) -> HttpResponse:
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
            **_ctx(request, OPERATOR),
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
            form.add_error(None, f"{exc.detail} ({exc.code})")
        else:
            messages.success(request, f"Takeover #{req.id} of {key} is waiting for an approver.")
            return redirect("dashboard:work_item", key=key)
    status = 400 if request.method == "POST" else 200
    return _page(
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
                **_ctx(request, OPERATOR),
            )
        except LeaseboardError as exc:
            form.add_error(None, f"{exc.detail} ({exc.code})")
    return _page(request, "takeovers/bulk.html", {"form": form, "bulk": bulk})


@require_GET
@role_required(OPERATOR)
def standing(request: HttpRequest) -> HttpResponse:
    return _page(
        request,
        "takeovers/standing.html",
        {
            "standings": selectors.my_standing(request.user),
            "resolutions": [
                ("confirmed", "confirmed"),
                ("not_applied", "not applied"),
                ("compensated", "compensated"),
            ],
        },
    )


def _standing_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    p = request.POST
    base = {
        "intervention_pk": pk,
        "lease_id": p.get("lease_id", ""),
        "epoch": _int(p.get("epoch")),
        **_ctx(request, OPERATOR),
    }
    try:
        if action == "extend":
            services.standing_extend(
                **base, extend_ms=_int(p.get("minutes")) * 60_000, reason=p.get("reason", "")
            )
            msg = "Standing extended."
        elif action == "complete":
            services.standing_complete(**base, note=p.get("note", ""))
            msg = "Work completed."
        elif action == "hand_back":
            services.standing_hand_back(**base, note=p.get("note", ""))
            msg = "Handed back to the agent pool; the next agent grant gets a new epoch."
        elif action == "assign":
            iv = services.standing_assign(
                **base, agent_name=p.get("agent", "").strip(), note=p.get("note", "")
            )
            msg = f"Assigned at epoch {iv.successor_lease.epoch if iv.successor_lease else '?'}."
        else:
            services.effect_record_human(
                **base,
                kind=p.get("kind", ""),
                target=p.get("target", ""),
                outcome=p.get("outcome", ""),
                detail=p.get("detail", ""),
                idempotency_key=p.get("idempotency_key", ""),
            )
            msg = "Effect recorded under your epoch."
    except LeaseboardError as exc:
        messages.error(request, f"{exc.detail} ({exc.code})")
    else:
        messages.success(request, msg)
    return _back(request, reverse("takeovers:standing"))


@require_POST
@role_required(OPERATOR)
def standing_extend(request: HttpRequest, pk: int) -> HttpResponse:
    return _standing_action(request, pk, "extend")


@require_POST
@role_required(OPERATOR)
def standing_complete(request: HttpRequest, pk: int) -> HttpResponse:
    return _standing_action(request, pk, "complete")


@require_POST
@role_required(OPERATOR)
def standing_hand_back(request: HttpRequest, pk: int) -> HttpResponse:
    return _standing_action(request, pk, "hand_back")


@require_POST
@role_required(OPERATOR)
def standing_assign(request: HttpRequest, pk: int) -> HttpResponse:
    return _standing_action(request, pk, "assign")


@require_POST
@role_required(OPERATOR)
def effect_record(request: HttpRequest, pk: int) -> HttpResponse:
    return _standing_action(request, pk, "record")


@require_POST
@role_required(OPERATOR)
def effect_reconcile(request: HttpRequest, effect_id: uuid.UUID) -> HttpResponse:
    try:
        reconciliation.effect_reconcile(
            effect_id=effect_id,
            resolution=request.POST.get("resolution", ""),
            note=request.POST.get("note", ""),
            **_ctx(request, OPERATOR),
        )
    except LeaseboardError as exc:
        messages.error(request, f"{exc.detail} ({exc.code})")
    else:
        messages.success(request, "Effect reconciled.")
    return _back(request, reverse("takeovers:standing"))


# --- approver ------------------------------------------------------------------------------


@require_GET
@role_required(APPROVER)
def pending(request: HttpRequest) -> HttpResponse:
    return _page(
        request,
        "takeovers/pending.html",
        {
            "requests": selectors.pending_requests(),
            "effects": selectors.pending_effects(),
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
            iv = services.takeover_approve(request_pk=pk, note=note, **_ctx(request, APPROVER))
            messages.success(request, f"Takeover #{pk} approved: epoch {iv.epoch}.")
        else:
            services.takeover_reject(request_pk=pk, note=note, **_ctx(request, APPROVER))
            messages.success(request, f"Takeover #{pk} rejected.")
    except Forbidden as exc:
        raise PermissionDenied(exc.detail) from None
    except LeaseboardError as exc:
        messages.error(request, f"Takeover #{pk}: {exc.detail} ({exc.code})")
    return redirect("takeovers:pending")


@require_POST
@role_required(APPROVER)
def effect_decide(request: HttpRequest, effect_id: uuid.UUID, decision: str) -> HttpResponse:
    if decision not in ("approve", "reject"):
        raise Http404("no such decision")
    note = request.POST.get("note", "")
    try:
        if decision == "approve":
            approvals.effect_approve(effect_id=effect_id, note=note, **_ctx(request, APPROVER))
            messages.success(request, "Effect authorized.")
        else:
            approvals.effect_reject(effect_id=effect_id, note=note, **_ctx(request, APPROVER))
            messages.success(request, "Effect rejected.")
    except LeaseboardError as exc:
        messages.error(request, f"Effect: {exc.detail} ({exc.code})")
    return redirect("takeovers:pending")


# --- manager -------------------------------------------------------------------------------


@require_GET
@role_required(MANAGER)
def interventions(request: HttpRequest) -> HttpResponse:
    filters = selectors.InterventionFilters.from_query(request.GET)
    return _page(
        request,
        "takeovers/interventions.html",
        {
            "page": selectors.interventions_list(filters),
            "reasons": ReasonCategory.choices,
            "outcomes": Intervention.Outcome.values,
        },
    )


@require_GET
@role_required(MANAGER)
def interventions_summary(request: HttpRequest) -> HttpResponse:
    filters = selectors.InterventionFilters.from_query(request.GET)
    return _page(
        request,
        "takeovers/summary.html",
        {"summary": selectors.summary(filters), "filters": filters},
    )


class _Echo:
    def write(self, value: str) -> str:
        return value


CSV_HEADER = [
    "id",
    "work_key",
    "queue",
    "reason_category",
    "reason",
    "requested_by",
    "approved_by",
    "break_glass",
    "reviewed_by",
    "agent",
    "revoked_epoch",
    "grantee",
    "standing_epoch",
    "requested_at_ms",
    "decided_at_ms",
    "request_to_decision_ms",
    "outcome",
    "ended_at_ms",
]


@require_GET
@role_required(MANAGER)
def interventions_csv(request: HttpRequest) -> StreamingHttpResponse:
    filters = selectors.InterventionFilters.from_query(request.GET)
    writer = csv.writer(_Echo())

    def safe(value: Any) -> str:
        # Spreadsheet formula injection: a cell never starts with = + - @.
        text = "" if value is None else str(value)
        return "'" + text if text[:1] in ("=", "+", "-", "@") else text

    def rows():  # type: ignore[no-untyped-def]
        yield writer.writerow(CSV_HEADER)
        for iv in selectors.interventions_for_export(filters):
            yield writer.writerow(
                [
                    safe(v)
                    for v in (
                        iv.id,
                        iv.work_item.key,
                        iv.queue.name,
                        iv.reason_category,
                        iv.reason_text,
                        iv.requested_by.username,
                        iv.approved_by.username,
                        iv.break_glass,
                        iv.reviewed_by_id or "",
                        iv.agent.name if iv.agent else "",
                        iv.epoch - 1,
                        iv.grantee.name,
                        iv.epoch,
                        iv.requested_at_ms,
                        iv.decided_at_ms,
                        iv.decided_at_ms - iv.requested_at_ms,
                        iv.outcome,
                        iv.ended_at_ms,
                    )
                ]
            )

    response = StreamingHttpResponse(rows(), content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="interventions.csv"'
    return response


@require_GET
@role_required(MANAGER)
def intervention_detail(request: HttpRequest, pk: int) -> HttpResponse:
    detail = selectors.intervention_detail(pk)
    if detail is None:
        raise Http404("no such intervention")
    return _page(request, "takeovers/intervention.html", {"d": detail})


@require_POST
@role_required(MANAGER)
def intervention_review(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        services.intervention_review(
            intervention_pk=pk, note=request.POST.get("note", ""), **_ctx(request, MANAGER)
        )
    except LeaseboardError as exc:
        messages.error(request, f"{exc.detail} ({exc.code})")
    else:
        messages.success(request, "Review recorded.")
    return redirect("takeovers:intervention", pk=pk)
