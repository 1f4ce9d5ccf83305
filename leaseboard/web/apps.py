from __future__ import annotations

from django.apps import AppConfig


class WebConfig(AppConfig):
    """Installed only so Django finds the shared template library (`{% load web %}`)."""

    name = "leaseboard.web"
    label = "web"
