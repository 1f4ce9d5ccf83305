"""The append-only, hash-chained audit log of manual and administrative actions.

Each entry carries the hash of the previous one; `manage.py verify_audit` re-computes the
chain. Writers serialize on the single AuditHead row, so the chain never forks. Viewing
never writes here.
"""

from __future__ import annotations

import hashlib
import json

from django.conf import settings
from django.db import models


class AuditHead(models.Model):
    """One row: the hash and sequence of the newest entry, locked by every audit write."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    seq = models.BigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, default="0" * 64)


class AuditEntry(models.Model):
    seq = models.BigIntegerField(unique=True)
    at_ms = models.BigIntegerField()
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    actor_name = models.CharField(max_length=150)
    actor_role = models.CharField(max_length=40)
    action = models.CharField(max_length=60)
    object_type = models.CharField(max_length=40)
    object_id = models.CharField(max_length=200)
    work_item = models.ForeignKey(
        "core.WorkItem", null=True, blank=True, on_delete=models.PROTECT, related_name="audit"
    )
    reason = models.CharField(max_length=1000, blank=True, default="")
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    request_id = models.CharField(max_length=64, blank=True, default="")
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    class Meta:
        indexes = [models.Index(fields=["work_item", "seq"], name="audit_work_idx")]

    def canonical(self) -> bytes:
        body = {
            "seq": self.seq,
            "at_ms": self.at_ms,
            "actor_user": self.actor_user_id,
            "actor_name": self.actor_name,
            "actor_role": self.actor_role,
            "action": self.action,
            "object_type": self.object_type,
            "object_id": self.object_id,
            "work_item": self.work_item_id,
            "reason": self.reason,
            "before": self.before,
            "after": self.after,
            "request_id": self.request_id,
            "prev_hash": self.prev_hash,
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":"), default=str).encode()

    def compute_hash(self) -> str:
        return hashlib.sha256(self.canonical()).hexdigest()

    def save(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if not self._state.adding:
            raise ValueError("audit entries are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise ValueError("audit entries are append-only")
