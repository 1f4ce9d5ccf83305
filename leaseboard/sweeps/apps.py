from django.apps import AppConfig


class SweepsConfig(AppConfig):
    name = "leaseboard.sweeps"
    label = "sweeps"
    verbose_name = "Leaseboard sweeps"

    def ready(self) -> None:
        # Binds shared tasks (delay_on_commit) to our app in web processes too.
        import leaseboard.celery  # noqa: F401
        from leaseboard.core.views import BROKER_CHECKS
        from leaseboard.sweeps.health import broker_check

        if broker_check not in BROKER_CHECKS:
            BROKER_CHECKS.append(broker_check)

        from leaseboard.core.services.alerts import ALERT_OPENED_HOOKS
        from leaseboard.sweeps.services import notify_on_commit

        # Every alert opened anywhere (sweeps, lazy expiry, stale effects, recipient
        # reports) fans out to its queue's notification targets.
        if notify_on_commit not in ALERT_OPENED_HOOKS:
            ALERT_OPENED_HOOKS.append(notify_on_commit)
