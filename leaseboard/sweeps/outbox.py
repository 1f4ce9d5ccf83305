"""The work a transaction owes to the broker, as rows written in that transaction
(docs/design.md §14): a committed alert's notifications are never lost with a message, and a
rolled-back one sends nothing. Epoch notices (core's EpochNotice) and approver notices
(ApprovalNotice) were outboxes already; this module makes the alerts' deliveries one
(NotificationDelivery rows, opened with the alert instead of later by a task) and says
what every outbox holds, for the sweep's safety net and /metrics.

A delivery row is dispatched by a drain (a task, woken after the commit, and started by
every sweep that finds rows due): the drain claims due rows by moving `due_at` on by
DISPATCH_CLAIM_S and enqueues one delivery task per row, so a slow target delays only
its own. A lost message, a dead worker or a broker restart leaves the row due again once
the claim runs out; a failed attempt sets `due_at` after its backoff. Nothing here
enqueues (leaseboard.sweeps.tasks does) and nothing here does network I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Min
from django.db.models.functions import Coalesce
from django.utils import timezone

from leaseboard.core.models import Alert, EpochNotice, Queue
from leaseboard.sweeps.models import ApprovalNotice, NotificationDelivery
from leaseboard.sweeps.notifications import notify_targets

DISPATCH_BATCH = 200


def dispatch_claim_s() -> float:
    """How long a dispatched delivery is left to its task before the sweep dispatches it
    again: its queueing, one attempt at the webhook timeout, and room to spare."""
    return max(60.0, 4 * settings.LEASEBOARD_WEBHOOK_TIMEOUT_S)


def alert_deliveries_open(alert_ids: list[int]) -> int:
    """In the caller's transaction (the one that opened the alerts): one pending delivery
    row per target of each alert whose queue (or the default) notifies; an existing row is
    kept. Three statements whatever the number of alerts. Returns the rows written."""
    if not alert_ids:
        return 0
    notify = dict(Queue.objects.exclude(notify={}).values_list("id", "notify"))
    if not notify and not settings.LEASEBOARD_NOTIFY_DEFAULT:
        return 0  # the common case: nobody is notified, nothing is read
    rows = []
    alerts = (  # an alert's queue is its work item's; a burst incident's its own
        Alert.objects.filter(id__in=alert_ids)
        .annotate(about_queue=Coalesce("work_item__queue_id", "queue_id"))
        .values_list("id", "kind", "about_queue")
    )
    webhook, email = NotificationDelivery.Channel.WEBHOOK, NotificationDelivery.Channel.EMAIL
    for alert_id, kind, queue_id in alerts:
        config = notify_targets(notify.get(queue_id), kind)
        targets = [(webhook, h["url"]) for h in config.get("webhooks", []) if h.get("url")]
        targets += [(email, address) for address in config.get("emails", []) if address]
        rows += [
            NotificationDelivery(alert_id=alert_id, channel=channel, target=str(target)[:500])
            for channel, target in targets
        ]
    return len(NotificationDelivery.objects.bulk_create(rows, ignore_conflicts=True))


def alert_deliveries_due_exist() -> bool:
    return NotificationDelivery.objects.filter(
        status=NotificationDelivery.Status.PENDING, due_at__lte=timezone.now()
    ).exists()


@transaction.atomic(durable=True)
def alert_deliveries_claim_due(*, limit: int = DISPATCH_BATCH) -> list[tuple[int, str]]:
    """Claim up to `limit` due deliveries for dispatch: (id, channel) each. Concurrent
    drains split the rows (SKIP LOCKED) and never claim one twice."""
    now = timezone.now()
    claimed = list(
        NotificationDelivery.objects.select_for_update(skip_locked=True, no_key=True)
        .filter(status=NotificationDelivery.Status.PENDING, due_at__lte=now)
        .order_by("due_at")
        .values_list("id", "channel")[:limit]
    )
    if claimed:
        NotificationDelivery.objects.filter(id__in=[i for i, _ in claimed]).update(
            due_at=now + timedelta(seconds=dispatch_claim_s())
        )
    return claimed


def alert_delivery_retry_in(delivery_id: int, seconds: float) -> None:
    """A failed attempt that will be tried again: due once its backoff has passed."""
    NotificationDelivery.objects.filter(
        id=delivery_id, status=NotificationDelivery.Status.PENDING
    ).update(due_at=timezone.now() + timedelta(seconds=seconds))


@dataclass(frozen=True)
class Backlog:
    pending: int
    oldest_due_s: float  # how long the longest-waiting due row has waited (0: none due)


OUTBOXES: dict[str, Any] = {
    "alert_deliveries": NotificationDelivery,
    "epoch_notices": EpochNotice,
    "approval_notices": ApprovalNotice,
}


def outbox_backlog() -> dict[str, Backlog]:
    """Pending rows and the age of the oldest due one, per outbox (each through its
    partial index on pending rows): what /metrics exports, so a stuck broker is visible."""
    now = timezone.now()
    out: dict[str, Backlog] = {}
    for name, model in OUTBOXES.items():
        pending = model.objects.filter(status="pending")
        oldest = pending.filter(due_at__lte=now).aggregate(at=Min("due_at"))["at"]
        out[name] = Backlog(
            pending=pending.count(),
            oldest_due_s=max(0.0, (now - oldest).total_seconds()) if oldest else 0.0,
        )
    return out


__all__ = [
    "Backlog",
    "alert_deliveries_claim_due",
    "alert_deliveries_due_exist",
    "alert_deliveries_open",
    "alert_delivery_retry_in",
    "outbox_backlog",
]
