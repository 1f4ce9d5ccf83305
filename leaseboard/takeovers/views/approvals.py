"""The approver's inbox (self-refreshing) and decisions: takeover requests and effects
awaiting approval, one at a time or several with one note."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from leaseboard.core.services import approvals
from leaseboard.core.services.bulk import BULK_MAX as BULK_MAX_BY_QUERY
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import LeaseboardError
from leaseboard.takeovers import services
from leaseboard.takeovers.selectors.approvals import effect_decision_page, inbox
from leaseboard.web.htmx import page_or_fragment, polled_fragment, wants_fragment
from leaseboard.web.kept import forget_input, keep_input, kept_input
from leaseboard.web.pages import render_page
from leaseboard.web.refusals import WHO_YOU_ARE, refuse, with_code
from leaseboard.web.roles import act_required, acting

BULK_MAX = 100


@require_GET
@act_required(Act.APPROVE_TAKEOVER, Act.APPROVE_EFFECT)
def pending(request: HttpRequest) -> HttpResponse:
    page = inbox()
    context = {
        "page": page,
        "bulk_max": BULK_MAX_BY_QUERY,
        "kept_note": kept_input(request, "decide").get("note", ""),
    }
    if wants_fragment(request, "inbox"):
        return polled_fragment(
            request, "takeovers/_inbox.html", context, version=page.version, seq=page.now_ms
        )
    return page_or_fragment(render_page(request, "takeovers/pending.html", context))


def _decide_request(request: HttpRequest, pk: int, decision: str, note: str) -> str:
    if decision == "approve":
        iv = services.takeover_approve(request_pk=pk, note=note, **acting(request))
        return f"Takeover #{pk} approved: epoch {iv.epoch}."
    services.takeover_reject(request_pk=pk, note=note, **acting(request))
    return f"Takeover #{pk} rejected."


def _decide_effect(
    request: HttpRequest, effect_id: str, decision: str, note: str, digest: str | None = None
) -> str:
    if decision == "approve":
        approvals.effect_approve(effect_id=effect_id, note=note, digest=digest, **acting(request))
        return "Effect authorized."
    approvals.effect_reject(effect_id=effect_id, note=note, digest=digest, **acting(request))
    return "Effect rejected."


@require_GET
@act_required(Act.APPROVE_EFFECT, Act.REJECT_EFFECT)
def effect_page(request: HttpRequest, effect_id: uuid.UUID) -> HttpResponse:
    """The decision page a notification links to: exactly the content to be decided on."""
    page = effect_decision_page(effect_id)
    if page is None:
        raise Http404("no such effect")
    kept = kept_input(request, f"effect:{effect_id}")
    return render_page(request, "takeovers/effect.html", {"page": page, "kept": kept})


@require_POST
@act_required(Act.APPROVE_TAKEOVER, Act.REJECT_TAKEOVER)
def request_decide(request: HttpRequest, pk: int, decision: str) -> HttpResponse:
    if decision not in ("approve", "reject"):
        raise Http404("no such decision")
    try:
        messages.success(request, _decide_request(request, pk, decision, _note(request)))
    except LeaseboardError as exc:
        refuse(request, exc, prefix=f"Takeover #{pk}: ")
    return redirect("takeovers:pending")


@require_POST
@act_required(Act.APPROVE_EFFECT, Act.REJECT_EFFECT)
def effect_decide(request: HttpRequest, effect_id: uuid.UUID, decision: str) -> HttpResponse:
    if decision not in ("approve", "reject"):
        raise Http404("no such decision")
    digest = request.POST.get("digest") or None
    try:
        messages.success(
            request, _decide_effect(request, str(effect_id), decision, _note(request), digest)
        )
    except LeaseboardError as exc:
        keep_input(request, f"effect:{effect_id}", ("note",))
        refuse(request, exc, prefix="Effect: ")
    else:
        forget_input(request, f"effect:{effect_id}")
    if request.POST.get("back") == "effect":
        return redirect("takeovers:effect", effect_id=effect_id)
    return redirect("takeovers:pending")


@require_POST
@act_required(Act.APPROVE_TAKEOVER, Act.APPROVE_EFFECT)
def decide_many(request: HttpRequest) -> HttpResponse:
    """Several requests or effects, one decision and one note; an outcome per item. Each
    decision is its own transaction, decided by the same services as one at a time."""
    decision = request.POST.get("decision", "")
    if decision not in ("approve", "reject"):
        raise Http404("no such decision")
    note = _note(request)
    picked = [("request", v) for v in request.POST.getlist("request")]
    picked += [("effect", v) for v in request.POST.getlist("effect")]
    if not picked:
        keep_input(request, "decide", ("note",))
        messages.error(request, with_code("Select at least one row to decide.", "validation_error"))
        return redirect("takeovers:pending")
    done, refused, codes = 0, [], []
    for kind, value in picked[:BULK_MAX]:
        try:
            if kind == "request":
                _decide_request(request, int(value), decision, note)
            else:
                _decide_effect(request, value, decision, note)
            done += 1
        except (ValueError, LeaseboardError) as exc:
            if isinstance(exc, LeaseboardError) and exc.code in WHO_YOU_ARE:
                refused.append(f"{kind} {value}: {exc.detail}")
            elif isinstance(exc, LeaseboardError):
                refused.append(f"{kind} {value}: {exc.detail}")
                codes.append(exc.code)
            else:
                refused.append(f"{kind} {value}: not a valid id")
    verb = "approved" if decision == "approve" else "rejected"
    if not refused:
        forget_input(request, "decide")
    if done:
        messages.success(request, f"{done} {verb} with your note.")
    if refused:
        keep_input(request, "decide", ("note",))
        text = "Not decided: " + "; ".join(refused)
        messages.error(request, with_code(text, ", ".join(dict.fromkeys(codes))) if codes else text)
    return redirect("takeovers:pending")


def _note(request: HttpRequest) -> str:
    return request.POST.get("note", "")
