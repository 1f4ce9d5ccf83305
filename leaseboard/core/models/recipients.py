"""Recipients: the services that receive effects and check their fencing, principals of
their own (docs/design.md §5), and the epoch-advance notices they registered a webhook for.

A recipient is not an executor: it never holds a lease or proposes an effect, so it has its
own table and credential (prefix `lbr_`, stored hashed). An agent's token does not
authenticate as a recipient, and a recipient's does not authenticate as an agent.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from leaseboard.core.models.choices import text_choices, values
from leaseboard.core.models.work import WorkItem
from leaseboard.domain.vocabulary import NoticeStatus


class Recipient(models.Model):
    name = models.CharField(max_length=100, unique=True)
    token_hash = models.CharField(max_length=64, unique=True, null=True, blank=True)
    is_active = models.BooleanField(default=True)
    # Epoch-advance webhook: told (work key, new epoch) on every grant, signed with the
    # secret (kept in clear: we sign with it, as with Queue.notify's webhook secrets).
    webhook_url = models.CharField(max_length=500, blank=True, default="")
    webhook_secret = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["id"],
                condition=Q(is_active=True) & ~Q(webhook_url=""),
                name="recipient_webhook_idx",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class EpochNotice(models.Model):
    """Outbox and delivery log of epoch-advance notices: one row per (recipient, work item,
    epoch), written in the grant's own transaction, so a committed grant never misses its
    notices and a rolled-back one sends none. Delivery takes the due rows in batches, one
    signed POST per recipient, and records each attempt on them; `due_at` is when a
    pending row is next tried (now, or after a failed attempt's backoff)."""

    Status = text_choices(NoticeStatus, module=__name__, qualname="EpochNotice.Status")

    recipient = models.ForeignKey(Recipient, on_delete=models.CASCADE, related_name="notices")
    work_item = models.ForeignKey(WorkItem, on_delete=models.PROTECT, related_name="+")
    epoch = models.BigIntegerField()
    # The granted lease's generation: the notice raises a mark to (generation, epoch).
    generation = models.BigIntegerField(default=0, db_default=0)
    status = models.CharField(
        max_length=10, choices=Status.choices, default=NoticeStatus.PENDING.value
    )
    attempts = models.PositiveIntegerField(default=0)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(db_default=Now())
    due_at = models.DateTimeField(db_default=Now())
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["recipient", "work_item", "epoch"], name="epoch_notice_unique"
            ),
            models.CheckConstraint(
                condition=Q(status__in=values(NoticeStatus)), name="epoch_notice_status_valid"
            ),
        ]
        indexes = [
            models.Index(
                fields=["due_at"],
                condition=Q(status=NoticeStatus.PENDING.value),
                name="epoch_notice_due_idx",
            ),
            models.Index(fields=["recipient", "-id"], name="epoch_notice_recipient_idx"),
        ]
