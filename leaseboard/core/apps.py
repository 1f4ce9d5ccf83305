from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "leaseboard.core"
    label = "core"
    verbose_name = "Leaseboard runtime"
