"""Celery tasks: thin wrappers that take ids and call services. Idempotent and short.

The top of the sweeps package: tasks import services and notifications, which never import
tasks. `notify_on_commit` is the receiver of core's `alerts_opened` signal (connected in
SweepsConfig.ready) and the one place that enqueues the fan-out.
"""

from __future__ import annotations

import logging
import time

from celery import shared_task
from django.conf import settings
from django.db import transaction

from leaseboard.sweeps import approver_notices, notifications, services
from leaseboard.sweeps.models import NotificationDelivery

log = logging.getLogger(__name__)


@shared_task(name="leaseboard.sweeps.tasks.sweep", acks_late=False, ignore_result=True)
def sweep() -> str:
    """Beat runs this every LEASEBOARD_SWEEP_INTERVAL_S. Acked early on purpose: a sweep
    lost with its worker is redone by the next tick; redelivery would only duplicate it."""
    report = services.sweep_run()
    if notifications.epoch_notices_due_exist():
        deliver_epoch_notices.delay()  # the outbox's safety net: nothing due is forgotten
    if approver_notices.approval_notices_due_exist():
        deliver_approval_notices.delay()  # requests, reminders and retries that are due
    summary = services.sweep_report_json(report)
    if report.jeopardy or report.expired or report.recovered or report.more:
        log.info("sweep %s", summary)
    if report.more:
        sweep.delay()  # more due leases than one bounded sweep takes: continue at once
    return summary


@shared_task(name="leaseboard.sweeps.tasks.retention", acks_late=False, ignore_result=True)
def retention() -> int:
    return services.lease_events_prune()


def notify_on_commit(sender: object = None, *, alert_ids: list[int], **_: object) -> None:
    """Enqueue the notification fan-out after commit, only for alerts that have targets."""
    for alert_id in notifications.alerts_with_targets(alert_ids):
        notify_alert.delay_on_commit(alert_id)


@shared_task(name="leaseboard.sweeps.tasks.notify_alert", acks_late=True, ignore_result=True)
def notify_alert(alert_id: int) -> int:
    """Fan an alert out to its queue's targets: one delivery row and task per target."""
    pending = notifications.alert_deliveries_pending(alert_id=alert_id)
    for delivery in pending:
        if delivery.channel == NotificationDelivery.Channel.WEBHOOK:
            deliver_webhook.delay(delivery.id)
        else:
            deliver_email.delay(delivery.id)
    return len(pending)


@shared_task(
    bind=True,
    name="leaseboard.sweeps.tasks.deliver_webhook",
    acks_late=True,
    ignore_result=True,
    max_retries=None,  # bounded by LEASEBOARD_WEBHOOK_MAX_RETRIES below
)
def deliver_webhook(self, delivery_id: int) -> str:  # type: ignore[no-untyped-def]
    retry_in = notifications.webhook_deliver(delivery_id=delivery_id)
    if retry_in is not None:
        # Backoff for an unreachable endpoint; never used for lease deadlines.
        raise self.retry(countdown=retry_in)
    return "done"


@shared_task(name="leaseboard.sweeps.tasks.deliver_email", acks_late=True, ignore_result=True)
def deliver_email(delivery_id: int) -> str:
    notifications.email_deliver(delivery_id=delivery_id)
    return "done"


_last_flush_enqueued = 0.0


def epoch_notices_on_commit(sender: object = None, *, notice_ids: list[int], **_: object) -> None:
    """After the grant commits, enqueue a delivery run, coalesced: a process enqueues at
    most one per LEASEBOARD_EPOCH_NOTICE_FLUSH_S, so a burst of grants costs the broker one
    message, not one each (and the acquire path keeps its speed). A notice that commits
    just after a run took the due rows waits for the next enqueue, or for the sweep, which
    starts a run whenever notices are due."""
    transaction.on_commit(_flush_soon)


def _flush_soon() -> None:
    global _last_flush_enqueued
    now = time.monotonic()
    if now - _last_flush_enqueued < settings.LEASEBOARD_EPOCH_NOTICE_FLUSH_S:
        return
    _last_flush_enqueued = now
    deliver_epoch_notices.delay()


@shared_task(name="leaseboard.sweeps.tasks.deliver_epoch_notices", ignore_result=True)
def deliver_epoch_notices() -> str:
    """Deliver the due epoch-advance notices, a few batches at most; failures wait for
    their backoff and a later run (the sweep starts one whenever notices are due)."""
    for _ in range(10):
        if not notifications.epoch_notices_deliver_due():
            break
    return "done"


def approval_requested_on_commit(sender: object = None, *, effect: object, **_: object) -> None:
    """Receiver of core's `approval_requested`, inside the proposal's transaction: write
    the notices there (the outbox), send them once it commits."""
    kind = approver_notices.ApprovalNotice.Kind.REQUEST
    if approver_notices.approval_notices_open(effect, kind):  # type: ignore[arg-type]
        transaction.on_commit(deliver_approval_notices.delay)


@shared_task(name="leaseboard.sweeps.tasks.deliver_approval_notices", ignore_result=True)
def deliver_approval_notices() -> str:
    """Send the due approver notices, a few batches at most; a failed webhook waits for
    its backoff and a later run (the sweep starts one whenever notices are due)."""
    for _ in range(10):
        if not approver_notices.approval_notices_deliver_due():
            break
    return "done"
