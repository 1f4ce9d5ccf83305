"""A rule-set change waiting for a second admin (four-eyes, LEASEBOARD_POLICY_FOUR_EYES).

The proposal is the queue's whole rule set after the change, against the policy version
it was proposed on: approving a proposal the rules have moved on from is refused."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from leaseboard.core.models import Queue


class PolicyChange(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        APPLIED = "applied"
        REJECTED = "rejected"
        WITHDRAWN = "withdrawn"

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="policy_changes")
    base_version = models.PositiveIntegerField()
    rules = models.JSONField(default=list)  # [RuleSpec.as_dict(), ...] in order
    default_decision = models.CharField(max_length=20)
    summary = models.CharField(max_length=300)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    requested_by_name = models.CharField(max_length=150)
    requested_at = models.DateTimeField(auto_now_add=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_by_name = models.CharField(max_length=150, blank=True, default="")
    decided_at = models.DateTimeField(null=True, blank=True)
    note = models.CharField(max_length=1000, blank=True, default="")

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["pending", "applied", "rejected", "withdrawn"]),
                name="policy_change_status_valid",
            ),
            # One proposal at a time per queue: the next one is made on top of the outcome.
            models.UniqueConstraint(
                fields=["queue"],
                condition=Q(status="pending"),
                name="policy_change_one_pending_per_queue",
            ),
        ]

    def __str__(self) -> str:
        return f"change {self.pk} to {self.queue_id}: {self.summary}"
