"""Sweep bookkeeping: the sweep clock (outage detection), cross-process metric counters,
and the notification delivery log. Lease and alert rows themselves live in core."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now

from leaseboard.core.models import Alert, Effect


class SweepState(models.Model):
    """One row. `last_sweep_at_ms` is stamped at the start of every sweep; a gap longer than
    LEASEBOARD_OUTAGE_MIN_MS records the outage window [outage_from_ms, outage_to_ms].
    `last_completed_at_ms` is stamped when a sweep finished: its age is how long expiry has
    been stopped (/healthz, /metrics, the dashboard's banner). `outage_cause` says why the
    window's sweeps did not run, as far as the sweeping process saw: `database_unavailable`
    (its sweeps failed on the database: a failover, a restart; no renewal could commit
    either) or `sweeps_stopped` (no sweep was even tried: workers or beat were down)."""

    class OutageCause(models.TextChoices):
        DATABASE_UNAVAILABLE = "database_unavailable"
        SWEEPS_STOPPED = "sweeps_stopped"

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    last_sweep_at_ms = models.BigIntegerField()
    last_completed_at_ms = models.BigIntegerField(null=True, blank=True)
    outage_from_ms = models.BigIntegerField(null=True, blank=True)
    outage_to_ms = models.BigIntegerField(null=True, blank=True)
    outage_cause = models.CharField(
        max_length=30, blank=True, default="", choices=OutageCause.choices
    )


class MetricCounter(models.Model):
    """Monotonic counters shared by every worker and web process (no process memory):
    incremented with an upsert, read by /metrics."""

    name = models.CharField(max_length=100)
    label = models.CharField(max_length=100, blank=True, default="")
    value = models.FloatField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["name", "label"], name="metric_counter_unique"),
        ]


class DeliveryStatus(models.TextChoices):
    """leaseboard.domain.vocabulary.NoticeStatus says what each means."""

    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"  # not owed any more: target removed, effect decided first
    DEAD = "dead"  # a dead letter: given up (retries spent, refused for good, policy)


class Attempts(models.Model):
    """What an outbox row keeps of its delivery attempts."""

    Status = DeliveryStatus

    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        abstract = True


class NotificationDelivery(Attempts):
    """One row per (alert, channel, target): the outbox, the delivery log and the
    idempotency key of the notification tasks, written in the transaction that opened the
    alert (leaseboard.sweeps.outbox). `due_at` is when a worker should next act on it: a
    dispatch claims it for a while, a failed attempt sets it after the backoff; the sweep
    dispatches whatever is due. A retried task finds its row and does not send twice."""

    class Channel(models.TextChoices):
        WEBHOOK = "webhook"
        EMAIL = "email"

    Status = DeliveryStatus

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.CharField(max_length=10, choices=Channel.choices)
    target = models.CharField(max_length=500)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    due_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["alert", "channel", "target"], name="notification_delivery_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=DeliveryStatus.values),
                name="notification_delivery_status_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "updated_at"], name="notify_status_idx"),
            models.Index(
                fields=["due_at"],
                condition=models.Q(status=DeliveryStatus.PENDING),
                name="notify_due_idx",
            ),
        ]


class ApprovalNotice(Attempts):
    """Outbox and delivery log of approver notifications: one row per (effect, kind,
    channel, target), written in the transaction that made the effect wait (kind
    `request`) or by the sweep before its deadline (`reminder`). Delivery takes the due
    rows, sends each once (a signed Slack-compatible webhook, or an e-mail), and records
    every attempt; a failed webhook is tried again after a backoff (`due_at`)."""

    class Kind(models.TextChoices):
        REQUEST = "request"
        REMINDER = "reminder"

    Channel = NotificationDelivery.Channel
    Status = DeliveryStatus

    effect = models.ForeignKey(Effect, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    channel = models.CharField(max_length=10, choices=NotificationDelivery.Channel.choices)
    target = models.CharField(max_length=500)
    created_at = models.DateTimeField(auto_now_add=True)
    due_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["effect", "kind", "channel", "target"], name="approval_notice_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=DeliveryStatus.values),
                name="approval_notice_status_valid",
            ),
        ]
        indexes = [
            models.Index(
                fields=["due_at"],
                condition=models.Q(status=DeliveryStatus.PENDING),
                name="approval_notice_due_idx",
            ),
        ]
