"""Takeover URLs, mounted under /takeovers/."""

from __future__ import annotations

from django.urls import path

from leaseboard.takeovers.views import approvals, approvals_bulk, interventions, requests, standing

app_name = "takeovers"

# deliberate: one path() a URL (Django's declarative shape), as every urls.py.
urlpatterns = [
    path("request/<path:key>", requests.request_takeover, name="request"),
    path("bulk", requests.bulk_request, name="bulk"),
    path("standing/", standing.standing, name="standing"),
    path("interventions/<int:pk>/extend", standing.standing_extend, name="extend"),
    path("interventions/<int:pk>/complete", standing.standing_complete, name="complete"),
    path("interventions/<int:pk>/hand-back", standing.standing_hand_back, name="hand_back"),
    path("interventions/<int:pk>/assign", standing.standing_assign, name="assign"),
    path("interventions/<int:pk>/effects", standing.effect_record, name="record_effect"),
    path("effects/<uuid:effect_id>/reconcile", standing.effect_reconcile, name="reconcile"),
    path("standing/<uuid:lease_id>/checkpoint", standing.standing_checkpoint, name="checkpoint"),
    path("pending/", approvals.pending, name="pending"),
    path("decide", approvals.decide_many, name="decide_many"),
    path("requests/<int:pk>/<str:decision>", approvals.request_decide, name="decide"),
    path("effects/decide-matching", approvals_bulk.effects_decide_bulk, name="effects_bulk"),
    path("effects/<uuid:effect_id>", approvals.effect_page, name="effect"),
    path("effects/<uuid:effect_id>/<str:decision>", approvals.effect_decide, name="effect_decide"),
    path("interventions/", interventions.interventions, name="interventions"),
    path("interventions/summary", interventions.interventions_summary, name="summary"),
    path("interventions/export.csv", interventions.interventions_csv, name="export"),
    path("interventions/<int:pk>", interventions.intervention_detail, name="intervention"),
    path("interventions/<int:pk>/review", interventions.intervention_review, name="review"),
]
