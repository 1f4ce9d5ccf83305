from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "leaseboard.core"
    label = "core"
    verbose_name = "Leaseboard runtime"

    def ready(self) -> None:
        from leaseboard.core.services.signin_audit import connect_sign_in_audit
        from leaseboard.telemetry import telemetry_setup

        connect_sign_in_audit()
        # Before the WSGI handler loads settings.MIDDLEWARE: Django's instrumentation adds
        # its middleware there. Off (and free) unless OTEL_* variables configure it.
        telemetry_setup()
