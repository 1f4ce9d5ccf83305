from django.apps import AppConfig


class SweepsConfig(AppConfig):
    name = "leaseboard.sweeps"
    label = "sweeps"
    verbose_name = "Leaseboard sweeps"

    def ready(self) -> None:
        # Binds shared tasks (delay_on_commit) to our app in web processes too.
        import leaseboard.celery  # noqa: F401
        from leaseboard.core.signals import alerts_opened
        from leaseboard.sweeps.tasks import notify_on_commit

        # Every alert opened anywhere (sweeps, lazy expiry, stale effects, recipient
        # reports, takeovers) fans out to its queue's notification targets.
        alerts_opened.connect(notify_on_commit, dispatch_uid="leaseboard.sweeps.notify_on_commit")
