"""What an operator does under human standing: see it, extend it, write a checkpoint,
complete the work, hand it back or assign it, record and reconcile effects. Each action
redirects back to a local `next` (or the standing page); after a refusal what was typed is
kept (leaseboard.web.kept) and shown again there."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from leaseboard.core.services import reconciliation
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import LeaseboardError
from leaseboard.takeovers import services
from leaseboard.takeovers.selectors.standing import my_standing
from leaseboard.web.htmx import page_or_fragment, polled_fragment, wants_fragment
from leaseboard.web.kept import forget_input, keep_input, kept_inputs
from leaseboard.web.pages import render_page
from leaseboard.web.params import int_param
from leaseboard.web.redirects import redirect_next
from leaseboard.web.refusals import refuse
from leaseboard.web.roles import act_required, acting, signed_in_user

# What each act's form posts that a person typed (kept after a refusal).
TYPED = {
    "extend": ("minutes", "reason"),
    "complete": ("note",),
    "hand_back": ("note",),
    "assign": ("agent", "note"),
    "record": ("kind", "target", "outcome", "detail"),
    "reconcile": ("resolution", "note"),
    "checkpoint": ("data", "note"),
}

RESOLUTIONS = [
    ("confirmed", "confirmed: it happened"),
    ("not_applied", "not applied: it did not happen"),
    ("compensated", "compensated: it happened and was undone"),
]


@require_GET
@act_required(Act.EXTEND_STANDING, Act.HAND_BACK)
def standing(request: HttpRequest) -> HttpResponse:
    """The operator's standing, polled: a warning once less than a fifth is left, lapsed
    items kept listed with a way to take the work over again."""
    page = my_standing(signed_in_user(request))
    context = {"page": page, "resolutions": RESOLUTIONS, "kept": kept_inputs(request)}
    if wants_fragment(request, "standings"):
        return polled_fragment(
            request, "takeovers/_standings.html", context, version=page.version, seq=page.now_ms
        )
    return page_or_fragment(render_page(request, "takeovers/standing.html", context))


def _standing_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    p = request.POST
    base = {
        "intervention_pk": pk,
        "lease_id": p.get("lease_id", ""),
        "epoch": int_param(p.get("epoch")),
        **acting(request),
    }
    try:
        if action == "extend":
            services.standing_extend(
                **base, extend_ms=int_param(p.get("minutes")) * 60_000, reason=p.get("reason", "")
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
        keep_input(request, f"{action}:{pk}", TYPED[action])
        refuse(request, exc)
    else:
        forget_input(request, f"{action}:{pk}")
        messages.success(request, msg)
    return redirect_next(request, reverse("takeovers:standing"))


# deliberate: one decorated view per act (Django's declarative shape), so each URL's
# guard reads where the view is defined; the work is in _standing_action, once.
@require_POST
@act_required(Act.EXTEND_STANDING)
def standing_extend(request: HttpRequest, pk: int) -> HttpResponse:
    return _standing_action(request, pk, "extend")


@require_POST
@act_required(Act.COMPLETE)
def standing_complete(request: HttpRequest, pk: int) -> HttpResponse:
    return _standing_action(request, pk, "complete")


@require_POST
@act_required(Act.HAND_BACK)
def standing_hand_back(request: HttpRequest, pk: int) -> HttpResponse:
    return _standing_action(request, pk, "hand_back")


@require_POST
@act_required(Act.ASSIGN)
def standing_assign(request: HttpRequest, pk: int) -> HttpResponse:
    return _standing_action(request, pk, "assign")


@require_POST
@act_required(Act.PROPOSE_EFFECT)
def effect_record(request: HttpRequest, pk: int) -> HttpResponse:
    return _standing_action(request, pk, "record")


@require_POST
@act_required(Act.RECONCILE)
def effect_reconcile(request: HttpRequest, effect_id: uuid.UUID) -> HttpResponse:
    try:
        reconciliation.effect_reconcile(
            effect_id=effect_id,
            resolution=request.POST.get("resolution", ""),
            note=request.POST.get("note", ""),
            **acting(request),
        )
    except LeaseboardError as exc:
        keep_input(request, f"reconcile:{effect_id}", TYPED["reconcile"])
        refuse(request, exc)
    else:
        forget_input(request, f"reconcile:{effect_id}")
        messages.success(request, "Effect reconciled.")
    return redirect_next(request, reverse("takeovers:standing"))


@require_POST
@act_required(Act.CHECKPOINT)
def standing_checkpoint(request: HttpRequest, lease_id: uuid.UUID) -> HttpResponse:
    """A checkpoint written by the person holding standing, under the standing's epoch."""
    form = f"checkpoint:{lease_id}"
    try:
        cp = services.standing_checkpoint(
            lease_id=lease_id,
            epoch=int_param(request.POST.get("epoch")),
            document=request.POST.get("data", ""),
            note=request.POST.get("note", ""),
            **acting(request),
        )
    except LeaseboardError as exc:
        keep_input(request, form, TYPED["checkpoint"])
        refuse(request, exc, prefix="Checkpoint: ")
    else:
        forget_input(request, form)
        messages.success(
            request, f"Checkpoint #{cp.seq} saved at epoch {cp.epoch}: the next holder reads it."
        )
    return redirect_next(request, reverse("takeovers:standing"))
