from django.apps import AppConfig


class SweepsConfig(AppConfig):
    name = "leaseboard.sweeps"
    label = "sweeps"
    verbose_name = "Leaseboard sweeps"

    def ready(self) -> None:
        # Binds shared tasks to our app in web processes too.
        import leaseboard.celery  # noqa: F401
        from leaseboard.core.badges import sweep_clock_register
        from leaseboard.core.signals import (
            alerts_opened,
            approval_requested,
            epoch_notices_opened,
        )
        from leaseboard.sweeps.models import SweepState
        from leaseboard.sweeps.tasks import (
            approval_requested_on_commit,
            epoch_notices_on_commit,
            notify_on_commit,
        )

        # Each receiver runs inside the sender's transaction: it writes the outbox rows
        # there and asks for a drain after the commit (a wake-up that never raises).
        # Every alert opened anywhere (sweeps, lazy expiry, stale effects, recipient
        # reports, takeovers) fans out to its queue's notification targets.
        alerts_opened.connect(notify_on_commit, dispatch_uid="leaseboard.sweeps.notify_on_commit")
        # Every grant that raised an epoch tells the recipients with a webhook.
        epoch_notices_opened.connect(
            epoch_notices_on_commit, dispatch_uid="leaseboard.sweeps.epoch_notices_on_commit"
        )
        # Every effect that waits for approval is sent to its approvers.
        approval_requested.connect(
            approval_requested_on_commit,
            dispatch_uid="leaseboard.sweeps.approval_requested_on_commit",
        )
        # The stale-sweeps banner of every page reads when a sweep last finished.
        sweep_clock_register(lambda: SweepState.objects.filter(id=1).values("last_completed_at_ms"))
