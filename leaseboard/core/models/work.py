"""Work admission: queues with capacity and default policy, work items with their epoch."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from leaseboard.core.models.choices import text_choices, values
from leaseboard.domain import vocabulary
from leaseboard.domain.reconciliation import PolicyDecision


class Queue(models.Model):
    """Admission scope. `capacity` None means unlimited; overflow waits or is rejected."""

    class Overflow(models.TextChoices):
        WAIT = "wait"
        REJECT = "reject"

    name = models.SlugField(max_length=100, unique=True)
    capacity = models.PositiveIntegerField(null=True, blank=True)
    overflow = models.CharField(max_length=10, choices=Overflow.choices, default=Overflow.WAIT)
    # Lease timing overrides (ttl_ms, renew_after_ms, jeopardy_after_ms, lock_delay_ms,
    # max_lifetime_ms); absent keys fall back to settings.LEASE_DEFAULTS.
    timing = models.JSONField(default=dict, blank=True)
    # Whether an agent may re-acquire while earlier effects are unreconciled (DESIGN §6).
    agent_acquire_needs_reconciliation = models.BooleanField(default=True)
    # Alert notification targets, read by the notification tasks.
    notify = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class WorkItem(models.Model):
    Admission = text_choices(vocabulary.Admission, module=__name__, qualname="WorkItem.Admission")
    Status = text_choices(vocabulary.WorkStatus, module=__name__, qualname="WorkItem.Status")

    key = models.CharField(max_length=200, unique=True)
    queue = models.ForeignKey(Queue, on_delete=models.PROTECT, related_name="work_items")
    title = models.CharField(max_length=300, blank=True, default="")
    scope = models.JSONField(default=dict, blank=True)
    timing = models.JSONField(default=dict, blank=True)
    admission = models.CharField(max_length=10, choices=Admission.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    # Fencing epoch: raised by every committed grant, in the grant's transaction. Never reused.
    epoch = models.BigIntegerField(default=0)
    created_at_ms = models.BigIntegerField()
    admitted_at_ms = models.BigIntegerField(null=True, blank=True)
    completed_at_ms = models.BigIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(admission__in=values(vocabulary.Admission)),
                name="work_item_admission_valid",
            ),
            models.CheckConstraint(
                condition=Q(status__in=values(vocabulary.WorkStatus)), name="work_item_status_valid"
            ),
            models.CheckConstraint(condition=Q(epoch__gte=0), name="work_item_epoch_non_negative"),
        ]
        indexes = [
            models.Index(
                fields=["queue", "admitted_at_ms"],
                condition=Q(admission=vocabulary.Admission.WAITING.value),
                name="work_item_waiting_idx",
            ),
        ]

    def __str__(self) -> str:
        return self.key


class EffectPolicy(models.Model):
    """Per-queue commit-time rule for an effect kind (`payment.refund`, `payment.*`, `*`)."""

    Decision = text_choices(PolicyDecision, module=__name__, qualname="EffectPolicy.Decision")

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="effect_policies")
    kind = models.CharField(max_length=100)
    decision = models.CharField(max_length=20, choices=Decision.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["queue", "kind"], name="effect_policy_unique_kind"),
            models.CheckConstraint(
                condition=Q(decision__in=values(PolicyDecision)),
                name="effect_policy_decision_valid",
            ),
        ]
