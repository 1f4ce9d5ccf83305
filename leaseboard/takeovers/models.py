"""Takeover requests, interventions (the manager's record of a human takeover), their
append-only timeline, and bulk requests keyed for idempotency.

Times are database-clock milliseconds (leaseboard.core.clock). Rows are written only by
leaseboard.takeovers.services.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

# ReasonCategory is defined once in core (from the domain's vocabulary) and used here.
from leaseboard.core.models import Executor, Lease, Queue, ReasonCategory, WorkItem


class RequestStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CONFLICT = "conflict"  # the target's epoch moved before the decision


class InterventionOutcome(models.TextChoices):
    OPEN = "open"  # the human holds standing
    COMPLETED = "completed"
    HANDED_BACK = "handed_back"
    ASSIGNED = "assigned"
    LAPSED = "lapsed"  # standing expired without an explicit end
    GRANTED_TO_AGENT = "granted_to_agent"  # the takeover named an agent as grantee


# deliberate: declared fields, alike in shape with core.models.BulkRevoke (an idempotent
# bulk request of its own app); no logic repeats.
class BulkTakeover(models.Model):
    """One bulk request: the idempotency key and the per-item outcomes it answered with."""

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    idempotency_key = models.CharField(max_length=200)
    reason_category = models.CharField(max_length=20, choices=ReasonCategory.choices)
    reason_text = models.CharField(max_length=1000)
    created_at_ms = models.BigIntegerField()
    results = models.JSONField(default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["requested_by", "idempotency_key"], name="bulk_takeover_idempotency"
            ),
        ]


class TakeoverRequest(models.Model):
    Status = RequestStatus

    work_item = models.ForeignKey(WorkItem, on_delete=models.PROTECT, related_name="+")
    # What the requester saw: the live lease (if any) and the item's epoch at request time.
    target_lease = models.ForeignKey(
        Lease, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    target_epoch = models.BigIntegerField()
    target_holder = models.ForeignKey(
        Executor, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    requester_role = models.CharField(max_length=40, default="operator")
    grantee = models.ForeignKey(Executor, on_delete=models.PROTECT, related_name="+")
    reason_category = models.CharField(max_length=20, choices=ReasonCategory.choices)
    reason_text = models.CharField(max_length=1000)
    standing_ms = models.PositiveIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    break_glass = models.BooleanField(default=False)
    bulk = models.ForeignKey(
        BulkTakeover, null=True, blank=True, on_delete=models.PROTECT, related_name="requests"
    )
    requested_at_ms = models.BigIntegerField()
    decide_by_ms = models.BigIntegerField()  # undecided past this, the request expires
    decided_at_ms = models.BigIntegerField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decision_note = models.CharField(max_length=1000, blank=True, default="")
    request_id = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["work_item"],
                condition=Q(status=RequestStatus.PENDING.value),
                name="takeover_one_pending_per_item",
            ),
            models.CheckConstraint(
                condition=Q(status__in=RequestStatus.values),
                name="takeover_status_valid",
            ),
            models.CheckConstraint(condition=~Q(reason_text=""), name="takeover_reason_required"),
            models.CheckConstraint(
                condition=Q(status=RequestStatus.PENDING.value) | Q(decided_at_ms__isnull=False),
                name="takeover_decided_has_time",
            ),
        ]
        indexes = [
            models.Index(
                fields=["decide_by_ms"],
                condition=Q(status=RequestStatus.PENDING.value),
                name="takeover_due_idx",
            ),
            models.Index(fields=["-requested_at_ms"], name="takeover_requested_idx"),
        ]


class Intervention(models.Model):
    """The record of one approved (or break-glass) takeover, from request to its end."""

    Outcome = InterventionOutcome

    request = models.OneToOneField(
        TakeoverRequest, on_delete=models.PROTECT, related_name="intervention"
    )
    work_item = models.ForeignKey(WorkItem, on_delete=models.PROTECT, related_name="+")
    queue = models.ForeignKey(Queue, on_delete=models.PROTECT, related_name="+")
    revoked_lease = models.ForeignKey(
        Lease, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # The agent (or earlier holder) that lost standing, if a lease was live.
    agent = models.ForeignKey(
        Executor, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    lease = models.ForeignKey(Lease, on_delete=models.PROTECT, related_name="+")
    grantee = models.ForeignKey(Executor, on_delete=models.PROTECT, related_name="+")
    epoch = models.BigIntegerField()
    reason_category = models.CharField(max_length=20, choices=ReasonCategory.choices)
    reason_text = models.CharField(max_length=1000)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    requested_at_ms = models.BigIntegerField()
    decided_at_ms = models.BigIntegerField()
    break_glass = models.BooleanField(default=False)
    reviewed_at_ms = models.BigIntegerField(null=True, blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    review_note = models.CharField(max_length=1000, blank=True, default="")
    outcome = models.CharField(max_length=20, choices=Outcome.choices, default=Outcome.OPEN)
    ended_at_ms = models.BigIntegerField(null=True, blank=True)
    # The lease granted when standing ended by assignment.
    successor_lease = models.ForeignKey(
        Lease, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        permissions = [("break_glass", "May take over a work item at once, without approval")]
        constraints = [
            models.CheckConstraint(
                condition=Q(outcome__in=InterventionOutcome.values),
                name="intervention_outcome_valid",
            ),
            models.CheckConstraint(
                condition=Q(outcome=InterventionOutcome.OPEN.value) | Q(ended_at_ms__isnull=False),
                name="intervention_ended_has_time",
            ),
        ]
        indexes = [
            models.Index(fields=["-requested_at_ms", "-id"], name="intervention_recent_idx"),
            models.Index(
                fields=["grantee"],
                condition=Q(outcome=InterventionOutcome.OPEN.value),
                name="intervention_open_idx",
            ),
        ]


class InterventionEvent(models.Model):
    """Append-only timeline of an intervention, written in the transaction of each step."""

    # deliberate: the timeline's steps declared member by member; alike in shape only.
    class Kind(models.TextChoices):
        REQUESTED = "requested"
        APPROVED = "approved"
        BREAK_GLASS = "break_glass"
        REVOKED = "revoked"
        GRANTED = "granted"
        ALERTS_RESOLVED = "alerts_resolved"
        HOLD_LIFTED = "hold_lifted"  # the work item's hold, ended by this takeover
        EXTENDED = "extended"
        CHECKPOINTED = "checkpointed"  # a checkpoint written under human standing
        EFFECT_RECORDED = "effect_recorded"
        EFFECT_RECONCILED = "effect_reconciled"
        COMPLETED = "completed"
        HANDED_BACK = "handed_back"
        ASSIGNED = "assigned"
        LAPSED = "lapsed"
        REVIEWED = "reviewed"

    intervention = models.ForeignKey(Intervention, on_delete=models.PROTECT, related_name="events")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    at_ms = models.BigIntegerField()
    actor_name = models.CharField(max_length=150, blank=True, default="")
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        indexes = [models.Index(fields=["intervention", "at_ms", "id"], name="interv_event_idx")]
