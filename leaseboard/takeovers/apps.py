from django.apps import AppConfig


class TakeoversConfig(AppConfig):
    name = "leaseboard.takeovers"
    label = "takeovers"
    verbose_name = "Leaseboard takeovers"

    def ready(self) -> None:
        from leaseboard.takeovers.sweep import register_sweep_step

        register_sweep_step()
