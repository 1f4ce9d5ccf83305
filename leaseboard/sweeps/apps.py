from django.apps import AppConfig


class SweepsConfig(AppConfig):
    name = "leaseboard.sweeps"
    label = "sweeps"
    verbose_name = "Leaseboard sweeps"

    def ready(self) -> None:
        from leaseboard.core.views import BROKER_CHECKS
        from leaseboard.sweeps.health import broker_check

        if broker_check not in BROKER_CHECKS:
            BROKER_CHECKS.append(broker_check)
