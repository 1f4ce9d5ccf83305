from __future__ import annotations

from django.apps import AppConfig


class PolicyConfig(AppConfig):
    name = "leaseboard.policy"
    label = "policy"
    verbose_name = "Leaseboard policy and configuration"
