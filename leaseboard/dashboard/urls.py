"""Dashboard URLs, mounted at the site root."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from leaseboard.dashboard import views
from leaseboard.dashboard.views.password import PasswordSet, PasswordSetDone

app_name = "dashboard"

urlpatterns = [
    path("", views.live_leases, name="live"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(next_page="dashboard:login"), name="logout"),
    path(
        "account/set-password/<uidb64>/<token>/",
        PasswordSet.as_view(),
        name="password_set",
    ),
    path("account/password-set/", PasswordSetDone.as_view(), name="password_set_done"),
    path("blocked/", views.blocked, name="blocked"),
    path("alerts/", views.alerts, name="alerts"),
    path("alerts/badge", views.alert_badge, name="alert_badge"),
    path("alerts/acknowledge", views.alerts_acknowledge_groups, name="alerts_acknowledge"),
    path("alerts/snooze", views.alerts_snooze_groups, name="alerts_snooze"),
    path("approvals/badge", views.pending_badge, name="pending_badge"),
    path("alerts/<int:pk>/acknowledge", views.alert_acknowledge, name="alert_acknowledge"),
    path("work/<path:key>", views.work_item, name="work_item"),
    path("leases/<uuid:lease_id>/revoke", views.lease_revoke, name="lease_revoke"),
    path("leases/<uuid:lease_id>/hold", views.lease_hold, name="lease_hold"),
    path("leases/<uuid:lease_id>/release-hold", views.lease_hold_release, name="hold_release"),
    path("leases/revoke", views.leases_revoke_bulk, name="revoke_bulk"),
    path("leases/hold", views.leases_hold_bulk, name="hold_bulk"),
    path("alerts/acknowledge-matching", views.alerts_acknowledge_bulk, name="acknowledge_bulk"),
    path("executors/<int:pk>", views.executor, name="executor"),
    path("executors/<int:pk>/quarantine", views.agent_quarantine, name="quarantine"),
    path("executors/<int:pk>/lift-quarantine", views.agent_quarantine_lift, name="lift_quarantine"),
    path("audit/", views.audit, name="audit"),
    path("fleet/", views.fleet, name="fleet"),
]
