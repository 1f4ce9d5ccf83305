"""Alerts for humans: jeopardy, expiry, lapsed standing, refused stale effects, outages.

`dedupe_key` is unique: one alert per (kind, lease, epoch) or per event, however many
sweeps race to open it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from leaseboard.core.models.choices import text_choices
from leaseboard.core.models.fields import not_null_index, sparse_ref
from leaseboard.core.models.leases import Lease
from leaseboard.core.models.work import Queue, WorkItem
from leaseboard.domain.vocabulary import AlertKind


class Alert(models.Model):
    Kind = text_choices(AlertKind, module=__name__, qualname="Alert.Kind")

    kind = models.CharField(max_length=20, choices=Kind.choices)
    # Unique through alert_dedupe_unique (Meta): a plain unique index, without the
    # pattern-ops twin Django adds for `unique=True` on PostgreSQL for LIKE queries no
    # one runs; every sweep-opened alert writes each index.
    dedupe_key = models.CharField(max_length=200)
    lease = models.ForeignKey(
        Lease, null=True, blank=True, on_delete=models.PROTECT, related_name="alerts"
    )
    work_item = sparse_ref(WorkItem, related_name="alerts")  # alert_work_idx leads with it
    epoch = models.BigIntegerField(null=True, blank=True)
    message = models.CharField(max_length=500)
    detail = models.JSONField(default=dict, blank=True)
    # How many times the incident happened (recipient reports: one alert, counted).
    occurrences = models.PositiveIntegerField(default=1, db_default=1)
    # An incident's latest recurrence (None: it happened once, at opened_at_ms). Recurrences
    # of one (agent, kind) inside LEASEBOARD_ALERT_FOLD_WINDOW_MS fold into the open alert
    # (core.services.alerts.alerts_fold): the folded row keeps its own facts, resolved at
    # once, and points here.
    last_seen_at_ms = models.BigIntegerField(null=True, blank=True)
    folded_into = sparse_ref("self")
    # Set only on a burst incident (core.services.alert_bursts): many agents' alerts of one
    # kind in this queue at once, grouped; its members point here through `folded_into`.
    queue = sparse_ref(Queue)
    due_at_ms = models.BigIntegerField(null=True, blank=True)  # when the event became due
    opened_at_ms = models.BigIntegerField()
    resolved_at_ms = models.BigIntegerField(null=True, blank=True)
    acknowledged_at_ms = models.BigIntegerField(null=True, blank=True)
    acknowledged_by = sparse_ref(settings.AUTH_USER_MODEL)
    acknowledge_note = models.CharField(max_length=1000, blank=True, default="")

    # deliberate: Django's declarative Meta (constraints and indexes), alike in shape in
    # every model; each entry is data the migrations are written from.
    class Meta:
        constraints = [models.UniqueConstraint(fields=["dedupe_key"], name="alert_dedupe_unique")]
        indexes = [
            models.Index(
                fields=["-opened_at_ms"],
                condition=Q(resolved_at_ms__isnull=True),
                name="alert_open_idx",
            ),
            models.Index(fields=["work_item", "-opened_at_ms"], name="alert_work_idx"),
            not_null_index("folded_into", "alert_folded_into_idx"),
            models.Index(
                fields=["queue", "kind"],
                condition=Q(queue__isnull=False),
                name="alert_burst_idx",
            ),
            not_null_index("acknowledged_by", "alert_acknowledged_by_idx"),
        ]


class AlertSnooze(models.Model):
    """A group of alerts (one agent's alerts of one kind) hidden from the badge and the
    default view until `until_ms`, new ones included; written by the alert services."""

    # The agent the group's alerts are about (the holder of their lease); none: alerts
    # about no agent's lease.
    executor = models.ForeignKey(
        "core.Executor", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    kind = models.CharField(max_length=20, choices=Alert.Kind.choices)
    until_ms = models.BigIntegerField()
    snoozed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    note = models.CharField(max_length=1000)
    created_at_ms = models.BigIntegerField()

    class Meta:
        indexes = [models.Index(fields=["kind", "executor", "-until_ms"], name="alert_snooze_idx")]
