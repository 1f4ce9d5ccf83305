"""The append-only audit log of manual and administrative actions, chained with a keyed MAC.

Each entry carries the MAC of the previous one and its own HMAC-SHA256, made with a key
that is not in the database (settings LEASEBOARD_AUDIT_KEY) and named by `key_id`, so a
database owner cannot rewrite the chain. Entries from before the keyed chain (`key_id`
empty) were plain SHA-256; they stay verifiable as a prefix anchored by the first keyed
entry (docs/audit.md). Writers serialize on the single AuditHead row, so the chain never
forks. Viewing never writes here.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from django.conf import settings
from django.db import models

GENESIS = "0" * 64


def canonical_bytes(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), default=str).encode()


def _derive(key: str, purpose: bytes) -> bytes:
    # One configured secret, separate sub-keys: an entry MAC can never pass for a
    # checkpoint signature, and the key id reveals nothing usable.
    return hmac.new(key.encode(), b"leaseboard audit " + purpose, hashlib.sha256).digest()


def audit_key_id(key: str) -> str:
    return _derive(key, b"key id").hex()[:16]


def entry_mac(key: str, body: dict[str, Any]) -> str:
    return hmac.new(_derive(key, b"entry v1"), canonical_bytes(body), hashlib.sha256).hexdigest()


def checkpoint_mac(key: str, body: dict[str, Any]) -> str:
    return hmac.new(
        _derive(key, b"checkpoint v1"), canonical_bytes(body), hashlib.sha256
    ).hexdigest()


class AuditHead(models.Model):
    """One row: the hash and sequence of the newest entry, locked by every audit write; and
    the newest entry a signed checkpoint was written for (by `audit_checkpoint`), so that
    `verify_audit` knows checkpoints are expected when the store outside the database holds
    none that recent (it was removed, emptied or replaced)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    seq = models.BigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, default=GENESIS)
    checkpoint_seq = models.BigIntegerField(default=0, db_default=0)
    checkpoint_at_ms = models.BigIntegerField(null=True, blank=True)


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
    # The OpenTelemetry trace of the act ("" when not traced); in the MAC when set.
    trace_id = models.CharField(max_length=32, blank=True, default="")
    # Which audit key made `hash` (an HMAC); empty for entries from before the keyed chain.
    key_id = models.CharField(max_length=16, blank=True, default="")
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    class Meta:
        indexes = [
            models.Index(fields=["work_item", "seq"], name="audit_work_idx"),
            # The audit page's filters, newest first within each.
            models.Index(fields=["actor_name", "-seq"], name="audit_actor_idx"),
            models.Index(fields=["action", "-seq"], name="audit_action_idx"),
            models.Index(fields=["at_ms"], name="audit_at_idx"),
        ]

    def body(self) -> dict[str, Any]:
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
        if self.key_id:
            body["key_id"] = self.key_id
        # Only when set, so that entries from before trace ids keep their MACs.
        if self.trace_id:
            body["trace_id"] = self.trace_id
        return body

    def canonical(self) -> bytes:
        return canonical_bytes(self.body())

    def compute_hash(self, key: str | None = None) -> str:
        """The entry's MAC under `key`; the plain SHA-256 of an unkeyed (legacy) entry."""
        if not self.key_id:
            return hashlib.sha256(self.canonical()).hexdigest()
        if key is None:
            raise ValueError("a keyed audit entry needs its key")
        return entry_mac(key, self.body())

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise ValueError("audit entries are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise ValueError("audit entries are append-only")


class AuditKeyring:
    """The configured audit keys by key id: the current one signs, retired ones verify."""

    def __init__(self, current: str, retired: tuple[str, ...] | list[str] = ()) -> None:
        self.current_key = current
        self.current_id = audit_key_id(current)
        self.keys = {audit_key_id(key): key for key in retired}
        self.keys[self.current_id] = current

    @classmethod
    def from_settings(cls) -> AuditKeyring:
        return cls(settings.LEASEBOARD_AUDIT_KEY, settings.LEASEBOARD_AUDIT_RETIRED_KEYS)
