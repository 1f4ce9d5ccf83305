"""Celery tasks: thin wrappers that take ids and call services. Idempotent and short.

The top of the sweeps package: tasks import services and notifications, which never import
tasks. The receivers of core's signals (connected in SweepsConfig.ready) run inside the
transaction that sent them: they write what the broker is owed as outbox rows there
(leaseboard.sweeps.outbox, or core's and approver_notices' own) and ask for a drain after
the commit with a wake-up (leaseboard.sweeps.wakeups), which never raises into the
request and is never the record: every sweep starts a drain of whatever is due.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from celery import shared_task
from django.conf import settings
from django.db import transaction

from leaseboard.core.dbfaults import database_unavailable
from leaseboard.sweeps import approver_notices, notifications, outbox, services
from leaseboard.sweeps.models import NotificationDelivery
from leaseboard.sweeps.wakeups import wake

log = logging.getLogger(__name__)
DELIVERY_BATCHES = 10  # at most, per run of a notice outbox's delivery
# Set when this process's sweep failed on the database, cleared by its next sweep: the gap
# that sweep finds was a database outage (a failover, a restart), not stopped sweeps.
_database_was_unavailable = False


@shared_task(name="leaseboard.sweeps.tasks.sweep", acks_late=False, ignore_result=True)
def sweep() -> str:
    """Beat runs this every LEASEBOARD_SWEEP_INTERVAL_S. Acked early on purpose: a sweep
    lost with its worker is redone by the next tick; redelivery would only duplicate it.
    With the database unreachable a tick logs one line and leaves the work to the next."""
    global _database_was_unavailable
    try:
        report = services.sweep_run(
            outage_cause="database_unavailable" if _database_was_unavailable else ""
        )
    except Exception as exc:
        if not database_unavailable(exc):
            raise
        _database_was_unavailable = True
        log.warning("sweep skipped, the database is unavailable: %s", str(exc).splitlines()[0])
        return "database unavailable"
    _database_was_unavailable = False
    # The outboxes' safety net: whatever is due (a lost wake-up, a retry after its backoff,
    # a dispatch whose task was lost with a broker restart) is drained from here.
    if notifications.epoch_notices_due_exist():
        wake(deliver_epoch_notices)
    if approver_notices.approval_notices_due_exist():
        wake(deliver_approval_notices)
    if outbox.alert_deliveries_due_exist():
        wake(deliver_notifications)
    summary = services.sweep_report_json(report)
    if report.jeopardy or report.expired or report.recovered or report.more:
        log.info("sweep %s", summary)
    if report.more:
        wake(sweep)  # more due leases than one bounded sweep takes: continue at once
    return summary


@shared_task(name="leaseboard.sweeps.tasks.retention", acks_late=False, ignore_result=True)
def retention() -> int:
    return services.lease_events_prune()


def notify_on_commit(sender: object = None, *, alert_ids: list[int], **_: object) -> None:
    """Receiver of core's `alerts_opened`, inside the transaction that opened the alerts:
    their delivery rows are written there (the outbox), a drain is asked for after it."""
    if outbox.alert_deliveries_open(alert_ids):
        transaction.on_commit(lambda: wake(deliver_notifications))


@shared_task(
    name="leaseboard.sweeps.tasks.deliver_notifications", acks_late=False, ignore_result=True
)
def deliver_notifications() -> int:
    """Dispatch the due alert deliveries, one task each (a slow target delays only its
    own), a few batches at most. A row whose task is lost is due again when its claim
    runs out (leaseboard.sweeps.outbox)."""
    dispatched = 0
    for _ in range(10):
        claimed = outbox.alert_deliveries_claim_due()
        for delivery_id, channel in claimed:
            task = deliver_webhook if channel == NotificationDelivery.Channel.WEBHOOK else None
            (task or deliver_email).delay(delivery_id)
            dispatched += 1
        if len(claimed) < outbox.DISPATCH_BATCH:
            break
    return dispatched


@shared_task(name="leaseboard.sweeps.tasks.notify_alert", acks_late=True, ignore_result=True)
def notify_alert(alert_id: int) -> int:
    """Fan one alert out to its targets, opening any delivery row it lacks (alerts opened
    before the outbox, or a fan-out repeated by hand); rows already sent send nothing."""
    pending = notifications.alert_deliveries_pending(alert_id=alert_id)
    for delivery in pending:
        if delivery.channel == NotificationDelivery.Channel.WEBHOOK:
            deliver_webhook.delay(delivery.id)
        else:
            deliver_email.delay(delivery.id)
    return len(pending)


@shared_task(name="leaseboard.sweeps.tasks.deliver_webhook", acks_late=True, ignore_result=True)
def deliver_webhook(delivery_id: int) -> str:
    retry_in = notifications.webhook_deliver(delivery_id=delivery_id)
    if retry_in is not None:
        # The backoff is kept on the row, not in a delayed message the worker would hold
        # unacknowledged (and a broker restart lose): the next drain after it sends again.
        outbox.alert_delivery_retry_in(delivery_id, retry_in)
        return "retry"
    return "done"


@shared_task(name="leaseboard.sweeps.tasks.deliver_email", acks_late=True, ignore_result=True)
def deliver_email(delivery_id: int) -> str:
    notifications.email_deliver(delivery_id=delivery_id)
    return "done"


def epoch_notices_on_commit(sender: object = None, *, notice_ids: list[int], **_: object) -> None:
    """Receiver of core's `epoch_notices_opened`, inside the grant's transaction (which
    wrote the notices): after the commit, a delivery run. Coalesced: at most one per
    LEASEBOARD_EPOCH_NOTICE_FLUSH_S, deferred rather than dropped, so a burst of grants
    costs the broker one message and the acquire path keeps its speed."""
    transaction.on_commit(
        lambda: wake(deliver_epoch_notices, min_interval_s=settings.LEASEBOARD_EPOCH_NOTICE_FLUSH_S)
    )


def _drained(deliver_due: Callable[[], bool]) -> str:
    """A few batches of an outbox at most: what is left waits for a later run."""
    for _ in range(DELIVERY_BATCHES):
        if not deliver_due():
            break
    return "done"


@shared_task(name="leaseboard.sweeps.tasks.deliver_epoch_notices", ignore_result=True)
def deliver_epoch_notices() -> str:
    """Deliver the due epoch-advance notices, a few batches at most; failures wait for
    their backoff and a later run (the sweep starts one whenever notices are due)."""
    return _drained(notifications.epoch_notices_deliver_due)


def approval_requested_on_commit(sender: object = None, *, effect: object, **_: object) -> None:
    """Receiver of core's `approval_requested`, inside the proposal's transaction: write
    the notices there (the outbox), ask for their delivery once it commits."""
    kind = approver_notices.ApprovalNotice.Kind.REQUEST
    if approver_notices.approval_notices_open(effect, kind):  # type: ignore[arg-type]
        transaction.on_commit(lambda: wake(deliver_approval_notices))


@shared_task(name="leaseboard.sweeps.tasks.deliver_approval_notices", ignore_result=True)
def deliver_approval_notices() -> str:
    """Send the due approver notices, a few batches at most; a failed webhook waits for
    its backoff and a later run (the sweep starts one whenever notices are due)."""
    return _drained(approver_notices.approval_notices_deliver_due)
