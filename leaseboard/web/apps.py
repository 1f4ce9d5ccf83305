from __future__ import annotations

from django.apps import AppConfig


class WebConfig(AppConfig):
    """Installed so Django finds the shared template library (`{% load web %}`) and the
    deploy checks that read MIDDLEWARE through the API lane's wrappers (web/checks.py)."""

    name = "leaseboard.web"
    label = "web"

    def ready(self) -> None:
        from leaseboard.web import checks  # noqa: F401  (registers the deploy checks)
