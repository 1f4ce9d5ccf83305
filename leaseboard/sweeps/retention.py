"""Retention (docs/design.md §11): lease events older than the configured age are deleted
in batches, each its own transaction, with the delivered notification logs of alerts as
old. Renewal history needs no pruning: a bounded window plus aggregates on the lease row."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from leaseboard.core.clock import db_now_ms
from leaseboard.core.dbfaults import long_bounds
from leaseboard.core.models import LeaseEvent
from leaseboard.sweeps.models import NotificationDelivery


def lease_events_prune(*, older_than_days: int | None = None, batch_size: int = 5000) -> int:
    """Retention: delete lease events older than the configured age, in batches (each its
    own transaction). Delivered notification logs past the age go too. Returns how many
    events were deleted."""
    days = older_than_days or settings.LEASEBOARD_EVENT_RETENTION_DAYS
    cutoff = db_now_ms() - days * 86_400_000
    deleted = 0
    while True:
        with transaction.atomic(durable=True):
            long_bounds()
            ids = list(
                LeaseEvent.objects.filter(at_ms__lt=cutoff)
                .order_by("at_ms")
                .values_list("id", flat=True)[:batch_size]
            )
            if ids:
                LeaseEvent.objects.filter(id__in=ids).delete()
        deleted += len(ids)
        if len(ids) < batch_size:
            break
    NotificationDelivery.objects.filter(
        status=NotificationDelivery.Status.DELIVERED,
        alert__opened_at_ms__lt=cutoff,
    ).delete()
    return deleted
