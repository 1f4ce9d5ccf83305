"""Decide by query on the approvals inbox: every effect waiting for approval that a filter
(kind, queue, agent, work key) matches, counted first, listed with its content, decided one
way with one note after a confirmation, and answered with an outcome per effect. Each
decision binds to the content digest this page showed."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_http_methods

from leaseboard.core.services import approvals_bulk
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import LeaseboardError
from leaseboard.takeovers.selectors.approvals_matching import effects_matching
from leaseboard.web.pages import render_bulk_page
from leaseboard.web.refusals import refused_for_form
from leaseboard.web.roles import act_required, acting


@require_http_methods(["GET", "POST"])
@act_required(Act.APPROVE_EFFECT, Act.REJECT_EFFECT)
def effects_decide_bulk(request: HttpRequest) -> HttpResponse:
    """GET: the matching waiting effects (the server evaluates the filter). POST: approve
    or reject the ticked ones; after an error the note and the ticks are kept."""
    matching = effects_matching(request.GET)
    post = request.POST
    picked = post.getlist("effect") if request.method == "POST" else []
    note = post.get("note", "") if request.method == "POST" else ""
    bulk, error, decision = None, "", post.get("decision", "")
    if request.method == "POST":
        try:
            bulk = approvals_bulk.effects_decide_bulk(
                decision=decision,
                effect_ids=picked,
                digests={eid: post.get(f"digest-{eid}", "") for eid in picked},
                note=note,
                query=matching.query,
                **acting(request),
            )
        except LeaseboardError as exc:
            error = refused_for_form(exc)
    context = {"matching": matching, "note": note, "error": error, "decision": decision}
    return render_bulk_page(
        request, "takeovers/effects_bulk.html", context, picked=picked, bulk=bulk
    )
