from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "leaseboard.core"
    label = "core"
    verbose_name = "Leaseboard runtime"

    def ready(self) -> None:
        from leaseboard.core.services.signin_audit import connect_sign_in_audit

        connect_sign_in_audit()
