"""The explain page (which rule decides a proposed effect, and why), the changes waiting
for a second admin (four-eyes) with the switch itself, and the history of configuration
changes (before -> after)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from leaseboard.core.models import Queue
from leaseboard.core.services.policy import policy_explain
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import LeaseboardError
from leaseboard.policy import selectors
from leaseboard.policy.forms import ExplainForm
from leaseboard.policy.services import changes as changes_service
from leaseboard.policy.services import four_eyes
from leaseboard.web.pages import render_page
from leaseboard.web.refusals import refusals_said, refuse
from leaseboard.web.roles import act_required, acting


@require_http_methods(["GET", "POST"])
@act_required(Act.EXPLAIN_POLICY)
def explain(request: HttpRequest) -> HttpResponse:
    """Read-only (a POST only because a payload is long): nothing is recorded."""
    form = ExplainForm(request.POST or None, initial={"queue": request.GET.get("queue", "")})
    result = None
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            result = policy_explain(
                kind=d["kind"],
                target=d["target"],
                payload=d["payload"],
                queue_name=d["queue"] or None,
                work_key=d["work_key"] or None,
            )
        except LeaseboardError as exc:
            form.add_error(
                exc.extra.get("param") if exc.extra.get("param") in form.fields else None,
                f"{exc.detail} ({exc.code})",
            )
    queues = list(Queue.objects.order_by("name").values_list("name", flat=True))
    context = {"form": form, "result": result, "queues": queues}
    return render_page(request, "policy/explain.html", context)


@require_GET
@act_required(Act.APPROVE_POLICY_CHANGE)
def changes(request: HttpRequest) -> HttpResponse:
    context = {"changes": selectors.changes_list(), "four_eyes": four_eyes.four_eyes_on()}
    return render_page(request, "policy/changes.html", context)


@require_POST
@act_required(Act.APPROVE_POLICY_CHANGE)
def change_decide(request: HttpRequest, pk: int, decision: str) -> HttpResponse:
    if decision not in ("approve", "reject"):
        raise Http404("no such decision")
    note = request.POST.get("note", "")
    with refusals_said(request, prefix=f"Change {pk}: ", missing="no such change"):
        if decision == "approve":
            done = changes_service.change_approve(change_id=pk, note=note, **acting(request))
            if done.link:
                # A new person, or a reset password: the link is shown once, to the approver.
                shown = {"who": done.who, "what": "one-time set-password link", "secret": done.link}
                context: dict[str, Any] = {
                    "changes": selectors.changes_list(),
                    "shown": shown,
                    "four_eyes": four_eyes.four_eyes_on(),
                }
                return render_page(request, "policy/changes.html", context)
            messages.success(request, f"Change {pk} applied ({done.change.what}).")
        else:
            done = changes_service.change_reject(change_id=pk, note=note, **acting(request))
            messages.success(request, f"Change {pk} {done.change.status}.")
    return redirect("policy:changes")


@require_POST
@act_required(Act.CHANGE_FOUR_EYES)
def four_eyes_change(request: HttpRequest) -> HttpResponse:
    """Turn four-eyes on (at once), or propose turning it off (a second admin decides)."""
    on = request.POST.get("on") == "on"
    try:
        result = four_eyes.four_eyes_set(
            on=on, note=request.POST.get("note", ""), **acting(request)
        )
    except LeaseboardError as exc:
        refuse(request, exc, prefix="Four-eyes: ")
    else:
        if result.proposal is not None:
            messages.success(
                request,
                f"Turning four-eyes off waits for a second admin (change {result.proposal.pk}).",
            )
        elif result.changed:
            messages.success(request, "Four-eyes is on.")
        else:
            messages.success(request, "Nothing changed.")
    return redirect("policy:changes")


@require_GET
@act_required(Act.CHANGE_RULE)
def history(request: HttpRequest) -> HttpResponse:
    page = selectors.config_history(request.GET.get("cursor", ""))
    return render_page(request, "policy/history.html", {"page": page})
