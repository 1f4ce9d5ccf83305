"""What operators do to agents directly, outside the takeover workflow: a bulk revoke (one
reason, many leases, keyed for idempotency) and a quarantine (an agent's credential
deactivated and its leases revoked, until someone lifts it).

Rows are written only by leaseboard.core.services.supervision.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from leaseboard.core.models.choices import text_choices
from leaseboard.core.models.executors import Executor
from leaseboard.domain.vocabulary import REASON_LABELS
from leaseboard.domain.vocabulary import ReasonCategory as _ReasonCategory

# Why a person stepped in; shared by takeovers, revokes and quarantines.
ReasonCategory = text_choices(
    _ReasonCategory, module=__name__, qualname="ReasonCategory", labels=REASON_LABELS
)


# deliberate: BulkRevoke and Quarantine are declared fields, alike in shape with
# takeovers.models.BulkTakeover (an idempotent bulk request of its own app) and with each
# other; no logic repeats.
class BulkRevoke(models.Model):
    """One bulk revoke: the idempotency key, what was asked and the per-lease outcomes."""

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    idempotency_key = models.CharField(max_length=200)
    reason_category = models.CharField(max_length=20, choices=ReasonCategory.choices)
    reason_text = models.CharField(max_length=1000)
    lease_ids = models.JSONField(default=list)  # as asked, in order
    created_at_ms = models.BigIntegerField()
    results = models.JSONField(default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["requested_by", "idempotency_key"], name="bulk_revoke_idempotency"
            ),
        ]


class Quarantine(models.Model):
    """An agent taken out of service: while open (not lifted) its credential is inactive."""

    executor = models.ForeignKey(Executor, on_delete=models.PROTECT, related_name="quarantines")
    reason_category = models.CharField(max_length=20, choices=ReasonCategory.choices)
    reason_text = models.CharField(max_length=1000)
    started_at_ms = models.BigIntegerField()
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    revoked_leases = models.JSONField(default=list)  # [{lease_id, work_key, epoch}]
    lifted_at_ms = models.BigIntegerField(null=True, blank=True)
    lifted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    lift_note = models.CharField(max_length=1000, blank=True, default="")

    # deliberate: Django's declarative Meta, alike in shape in every model (see Alert.Meta).
    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["executor"],
                condition=Q(lifted_at_ms__isnull=True),
                name="quarantine_one_open_per_executor",
            ),
            models.CheckConstraint(condition=~Q(reason_text=""), name="quarantine_reason_required"),
        ]
        indexes = [models.Index(fields=["-started_at_ms"], name="quarantine_recent_idx")]

    @property
    def is_open(self) -> bool:
        return self.lifted_at_ms is None
