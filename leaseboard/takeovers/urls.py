"""Takeover URLs, mounted under /takeovers/."""

from __future__ import annotations

from django.urls import path

from leaseboard.takeovers import views

app_name = "takeovers"

urlpatterns = [
    path("request/<path:key>", views.request_takeover, name="request"),
    path("bulk", views.bulk_request, name="bulk"),
    path("standing/", views.standing, name="standing"),
    path("interventions/<int:pk>/extend", views.standing_extend, name="extend"),
    path("interventions/<int:pk>/complete", views.standing_complete, name="complete"),
    path("interventions/<int:pk>/hand-back", views.standing_hand_back, name="hand_back"),
    path("interventions/<int:pk>/assign", views.standing_assign, name="assign"),
    path("interventions/<int:pk>/effects", views.effect_record, name="record_effect"),
    path("effects/<uuid:effect_id>/reconcile", views.effect_reconcile, name="reconcile"),
    path("pending/", views.pending, name="pending"),
    path("requests/<int:pk>/<str:decision>", views.request_decide, name="decide"),
    path("effects/<uuid:effect_id>/<str:decision>", views.effect_decide, name="effect_decide"),
    path("interventions/", views.interventions, name="interventions"),
    path("interventions/summary", views.interventions_summary, name="summary"),
    path("interventions/export.csv", views.interventions_csv, name="export"),
    path("interventions/<int:pk>", views.intervention_detail, name="intervention"),
    path("interventions/<int:pk>/review", views.intervention_review, name="review"),
]
