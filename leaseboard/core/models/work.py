"""Work admission: queues with capacity, admission envelope and default policy, work items
with their epoch. A queue's commit-time rules are in leaseboard.core.models.policy."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from leaseboard.core.models.choices import text_choices, values
from leaseboard.core.models.fields import not_null_index, sparse_ref
from leaseboard.domain import vocabulary
from leaseboard.domain.reconciliation import PolicyDecision


class Queue(models.Model):
    """Admission scope. `capacity` None means unlimited; overflow waits or is rejected.
    The envelope (admits_scopes, leases_per_agent, windows) is validated by
    leaseboard.domain.envelopes; the rules decide effects, `default_decision` when none
    matches."""

    Decision = text_choices(PolicyDecision, module=__name__, qualname="Queue.Decision")

    class Overflow(models.TextChoices):
        WAIT = "wait"
        REJECT = "reject"

    name = models.SlugField(max_length=100, unique=True)
    capacity = models.PositiveIntegerField(null=True, blank=True)
    overflow = models.CharField(max_length=10, choices=Overflow.choices, default=Overflow.WAIT)
    # Lease timing overrides (ttl_ms, renew_after_ms, jeopardy_after_ms, lock_delay_ms,
    # max_lifetime_ms); absent keys fall back to settings.LEASE_DEFAULTS.
    timing = models.JSONField(default=dict, blank=True)
    # Whether an agent may re-acquire while earlier effects are unreconciled (docs/design.md §6).
    agent_acquire_needs_reconciliation = models.BooleanField(default=True)
    # Alert notification targets, read by the notification tasks.
    notify = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Admission envelope: {scope key: [globs]}; live leases one agent may hold here; the
    # time windows ({"tz", "open": [{days, from, to}]}) in which leases are granted.
    admits_scopes = models.JSONField(default=dict, blank=True)
    leases_per_agent = models.PositiveIntegerField(null=True, blank=True)
    windows = models.JSONField(default=dict, blank=True)
    # Commit-time policy: the decision when no rule matches, and a counter raised with
    # every change of the rule set (compiled rule sets are cached by it).
    default_decision = models.CharField(
        max_length=20, choices=Decision.choices, default=PolicyDecision.ALLOW.value
    )
    policy_version = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(default_decision__in=values(PolicyDecision)),
                name="queue_default_decision_valid",
            ),
            models.CheckConstraint(
                condition=Q(leases_per_agent__isnull=True) | Q(leases_per_agent__gte=1),
                name="queue_leases_per_agent_positive",
            ),
        ]

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
    # The agent that admitted it (None: admitted before this was recorded, or by a service).
    admitted_by = sparse_ref("core.Executor")  # nobody lists items by admitter often
    # An operator's hold (docs/design.md §9: a hold belongs to the work item, not to one lease):
    # while set, no new effect is authorized and no agent acquires it; a live lease keeps
    # a copy (Lease.held_at_ms) for the renew path. Written only by core.services.holds.
    held_at_ms = models.BigIntegerField(null=True, blank=True)
    hold_reason = models.CharField(max_length=1100, blank=True, default="", db_default="")
    held_by = sparse_ref(settings.AUTH_USER_MODEL)

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
            not_null_index("held_at_ms", "work_item_held_idx"),
            not_null_index("held_by", "work_item_held_by_idx"),
            not_null_index("admitted_by", "work_item_admitted_by_idx"),
        ]

    def __str__(self) -> str:
        return self.key
