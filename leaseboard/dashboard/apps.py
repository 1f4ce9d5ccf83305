from __future__ import annotations

from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "leaseboard.dashboard"
    label = "dashboard"
    default_auto_field = "django.db.models.BigAutoField"
