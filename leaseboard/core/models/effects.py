"""Effects: proposed before they are attempted, decided, then reported and reconciled."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from leaseboard.core.models.choices import text_choices, values
from leaseboard.core.models.executors import Executor
from leaseboard.core.models.fields import not_null_index, sparse_ref
from leaseboard.core.models.leases import Lease
from leaseboard.core.models.work import WorkItem
from leaseboard.domain import reconciliation as rc


class Effect(models.Model):
    Decision = text_choices(rc.Decision, module=__name__, qualname="Effect.Decision")
    Outcome = text_choices(rc.Outcome, module=__name__, qualname="Effect.Outcome")
    Resolution = text_choices(rc.Resolution, module=__name__, qualname="Effect.Resolution")
    Source = text_choices(rc.Source, module=__name__, qualname="Effect.Source")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No single-column indexes on work_item and executor: effect_work_idx and
    # effect_executor_idx (and the idempotency key) lead with them, and every effect
    # proposed writes each index.
    work_item = models.ForeignKey(
        WorkItem, on_delete=models.PROTECT, related_name="effects", db_index=False
    )
    lease = models.ForeignKey(
        Lease, null=True, blank=True, on_delete=models.PROTECT, related_name="effects"
    )
    executor = sparse_ref(Executor, related_name="effects")
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.AGENT)
    epoch = models.BigIntegerField()  # the epoch the proposer presented
    current_epoch = models.BigIntegerField()  # the work item's epoch at decision time
    kind = models.CharField(max_length=100)
    target = models.CharField(max_length=500)
    idempotency_key = models.CharField(max_length=200)
    payload = models.JSONField(default=dict, blank=True)
    # content_digest(kind, target, payload): what a decision (and its token) is bound to.
    # Empty for rows from before content binding and for recipients' reports.
    content_digest = models.CharField(max_length=71, blank=True, default="")

    decision = models.CharField(max_length=20, choices=Decision.choices)
    refusal_code = models.CharField(max_length=40, blank=True, default="")
    refusal_detail = models.CharField(max_length=500, blank=True, default="")
    fencing_token = models.TextField(blank=True, default="")
    # When that token dies: the lease's expiry at the moment of issue (never later).
    token_expires_at_ms = models.BigIntegerField(null=True, blank=True)
    proposed_at_ms = models.BigIntegerField()
    decided_at_ms = models.BigIntegerField(null=True, blank=True)
    decided_by = sparse_ref(settings.AUTH_USER_MODEL)
    # The commit-time rule that decided (by name, "global:NAME" for one of the rules for
    # every queue; "" when a default did) and the queue's policy version then, which moves
    # with the rules for every queue too: the audit log holds that version's rule set.
    rule_name = models.CharField(max_length=100, blank=True, default="")
    # pending_approval: decided by then, else `on_timeout` applies (reject or approve).
    decide_by_ms = models.BigIntegerField(null=True, blank=True)
    on_timeout = models.CharField(max_length=10, blank=True, default="")
    policy_version = models.PositiveIntegerField(null=True, blank=True)
    # The deciding rule's condition could not be evaluated (a missing field, an overflow,
    # the iteration budget...): the rule failed closed, and this says why (issue 33).
    rule_error = models.CharField(max_length=300, blank=True, default="")
    # pending_approval: when a notice first reached an approver (an e-mail handed to the
    # mail server, a webhook answered 2xx). None: nobody was told, so an `approve` default
    # does not apply (issue 33).
    approver_reached_at_ms = models.BigIntegerField(null=True, blank=True)

    outcome = models.CharField(max_length=10, choices=Outcome.choices, blank=True, default="")
    outcome_detail = models.CharField(max_length=1000, blank=True, default="")
    outcome_at_ms = models.BigIntegerField(null=True, blank=True)

    # The OpenTelemetry trace the proposal came in (32 hex digits; "" when not traced): the
    # caller's trace when it sent `traceparent` (an MCP gateway's tool call, say).
    trace_id = models.CharField(max_length=32, blank=True, default="")

    resolution = models.CharField(max_length=12, choices=Resolution.choices, blank=True, default="")
    resolution_note = models.CharField(max_length=1000, blank=True, default="")
    resolved_at_ms = models.BigIntegerField(null=True, blank=True)
    resolved_by = sparse_ref(Executor)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["executor", "idempotency_key"], name="effect_idempotency_unique"
            ),
            models.CheckConstraint(
                condition=Q(decision__in=values(rc.Decision)),
                name="effect_decision_valid",
            ),
            models.CheckConstraint(
                condition=Q(outcome__in=values(rc.Outcome, blank=True)),
                name="effect_outcome_valid",
            ),
            models.CheckConstraint(
                condition=Q(resolution__in=values(rc.Resolution, blank=True)),
                name="effect_resolution_valid",
            ),
            models.CheckConstraint(
                condition=~Q(decision=rc.Decision.REFUSED.value) | ~Q(refusal_code=""),
                name="effect_refusal_has_code",
            ),
        ]
        indexes = [
            models.Index(fields=["work_item", "proposed_at_ms"], name="effect_work_idx"),
            # Partial: an agent's effect (no deciding user, no resolver) enters neither.
            not_null_index("decided_by", "effect_decided_by_idx"),
            not_null_index("resolved_by", "effect_resolved_by_idx"),
            models.Index(
                fields=["work_item"],
                condition=Q(
                    decision=rc.Decision.AUTHORIZED.value,
                    resolution="",
                    outcome__in=["", rc.Outcome.UNKNOWN.value],
                ),
                name="effect_unreconciled_idx",
            ),
            models.Index(
                fields=["proposed_at_ms"],
                condition=Q(decision=rc.Decision.PENDING_APPROVAL.value),
                name="effect_pending_idx",
            ),
            models.Index(fields=["executor", "proposed_at_ms"], name="effect_executor_idx"),
            models.Index(
                fields=["decide_by_ms"],
                condition=Q(decision=rc.Decision.PENDING_APPROVAL.value),
                name="effect_decide_by_idx",
            ),
        ]

    @property
    def needs_reconciliation(self) -> bool:
        return rc.needs_reconciliation(self.decision, self.outcome, self.resolution)
