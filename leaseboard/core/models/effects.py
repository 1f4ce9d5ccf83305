"""Effects: proposed before they are attempted, decided, then reported and reconciled."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from leaseboard.core.models.executors import Executor
from leaseboard.core.models.leases import Lease
from leaseboard.core.models.work import WorkItem


class Effect(models.Model):
    class Decision(models.TextChoices):
        AUTHORIZED = "authorized"
        REFUSED = "refused"
        PENDING_APPROVAL = "pending_approval"

    class Outcome(models.TextChoices):
        APPLIED = "applied"
        FAILED = "failed"
        UNKNOWN = "unknown"

    class Resolution(models.TextChoices):
        CONFIRMED = "confirmed"
        NOT_APPLIED = "not_applied"
        COMPENSATED = "compensated"

    class Source(models.TextChoices):
        AGENT = "agent"  # proposed through the API
        HUMAN = "human"  # recorded by a human acting under standing
        RECIPIENT = "recipient"  # a refusal reported by a recipient's guard

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    work_item = models.ForeignKey(WorkItem, on_delete=models.PROTECT, related_name="effects")
    lease = models.ForeignKey(
        Lease, null=True, blank=True, on_delete=models.PROTECT, related_name="effects"
    )
    executor = models.ForeignKey(
        Executor, null=True, blank=True, on_delete=models.PROTECT, related_name="effects"
    )
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.AGENT)
    epoch = models.BigIntegerField()  # the epoch the proposer presented
    current_epoch = models.BigIntegerField()  # the work item's epoch at decision time
    kind = models.CharField(max_length=100)
    target = models.CharField(max_length=500)
    idempotency_key = models.CharField(max_length=200)
    payload = models.JSONField(default=dict, blank=True)

    decision = models.CharField(max_length=20, choices=Decision.choices)
    refusal_code = models.CharField(max_length=40, blank=True, default="")
    refusal_detail = models.CharField(max_length=500, blank=True, default="")
    fencing_token = models.TextField(blank=True, default="")
    proposed_at_ms = models.BigIntegerField()
    decided_at_ms = models.BigIntegerField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    outcome = models.CharField(max_length=10, choices=Outcome.choices, blank=True, default="")
    outcome_detail = models.CharField(max_length=1000, blank=True, default="")
    outcome_at_ms = models.BigIntegerField(null=True, blank=True)

    resolution = models.CharField(max_length=12, choices=Resolution.choices, blank=True, default="")
    resolution_note = models.CharField(max_length=1000, blank=True, default="")
    resolved_at_ms = models.BigIntegerField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        Executor, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["executor", "idempotency_key"], name="effect_idempotency_unique"
            ),
            models.CheckConstraint(
                condition=Q(decision__in=["authorized", "refused", "pending_approval"]),
                name="effect_decision_valid",
            ),
            models.CheckConstraint(
                condition=Q(outcome__in=["", "applied", "failed", "unknown"]),
                name="effect_outcome_valid",
            ),
            models.CheckConstraint(
                condition=Q(resolution__in=["", "confirmed", "not_applied", "compensated"]),
                name="effect_resolution_valid",
            ),
            models.CheckConstraint(
                condition=~Q(decision="refused") | ~Q(refusal_code=""),
                name="effect_refusal_has_code",
            ),
        ]
        indexes = [
            models.Index(fields=["work_item", "proposed_at_ms"], name="effect_work_idx"),
            models.Index(
                fields=["work_item"],
                condition=Q(decision="authorized", resolution="", outcome__in=["", "unknown"]),
                name="effect_unreconciled_idx",
            ),
            models.Index(
                fields=["proposed_at_ms"],
                condition=Q(decision="pending_approval"),
                name="effect_pending_idx",
            ),
            models.Index(fields=["executor", "proposed_at_ms"], name="effect_executor_idx"),
        ]

    @property
    def needs_reconciliation(self) -> bool:
        from leaseboard.domain.reconciliation import needs_reconciliation

        return needs_reconciliation(self.decision, self.outcome, self.resolution)
