"""The sandbox's own data: a ledger of every payment attempt and the epoch high-water marks.

`EpochMark` has the columns `leaseboard_recipient.guard.check_in` expects (work_key,
generation, high_water, updated_at), so on PostgreSQL the guard's own statement runs
against it.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now


class EpochMark(models.Model):
    """Highest fencing order (generation, epoch) this recipient has accepted per work item;
    never lowered (docs/design.md §5). Marks from before generations are generation 0."""

    work_key = models.CharField(max_length=200, primary_key=True)
    generation = models.BigIntegerField(default=0, db_default=0)
    high_water = models.BigIntegerField()
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(high_water__gte=0), name="sandbox_mark_high_water_nonneg"
            ),
        ]


class PaymentStatus(models.TextChoices):
    ACCEPTED = "accepted"
    REFUSED = "refused"


class Payment(models.Model):
    """One attempted payment: accepted (money moved) or refused (and why)."""

    Status = PaymentStatus

    status = models.CharField(max_length=10, choices=Status.choices)
    refusal_code = models.CharField(max_length=40, blank=True, default="")
    work_key = models.CharField(max_length=200, blank=True, default="")
    epoch = models.BigIntegerField(null=True, blank=True)  # the epoch presented
    high_water = models.BigIntegerField(null=True, blank=True)  # the mark after the check
    holder = models.CharField(max_length=150, blank=True, default="")
    effect_id = models.CharField(max_length=64, blank=True, default="")
    # The caller's idempotency key (default: the effect id): one accepted payment per key.
    payment_key = models.CharField(max_length=200, blank=True, default="")
    amount_cents = models.BigIntegerField(default=0)
    currency = models.CharField(max_length=3, default="EUR")
    payee = models.CharField(max_length=200, blank=True, default="")
    detail = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        indexes = [models.Index(fields=["work_key", "-id"], name="sandbox_payment_work")]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=PaymentStatus.values), name="sandbox_payment_status"
            ),
            models.UniqueConstraint(
                fields=["payment_key"],
                condition=Q(status=PaymentStatus.ACCEPTED.value) & ~Q(payment_key=""),
                name="sandbox_payment_once",
            ),
        ]
