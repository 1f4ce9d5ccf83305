"""Append to the hash-chained audit log, in the caller's transaction."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from leaseboard.core.authority import Actor, audit_role
from leaseboard.core.models import AuditEntry, AuditHead, WorkItem
from leaseboard.domain.authority import Act


def audit_record(
    *,
    at_ms: int,
    actor_name: str,
    actor_role: str,
    action: str,
    object_type: str,
    object_id: str,
    actor_user_id: int | None = None,
    work_item: WorkItem | None = None,
    reason: str = "",
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    request_id: str = "",
) -> AuditEntry:
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit_record must run inside the transaction of the change it records")
    # The head row serializes writers so the chain never forks.
    head, _ = AuditHead.objects.select_for_update().get_or_create(id=1)
    entry = AuditEntry(
        seq=head.seq + 1,
        at_ms=at_ms,
        actor_user_id=actor_user_id,
        actor_name=actor_name[:150],
        actor_role=actor_role,
        action=action,
        object_type=object_type,
        object_id=str(object_id),
        work_item=work_item,
        reason=reason[:1000],
        before=before or {},
        after=after or {},
        request_id=request_id[:64],
        prev_hash=head.last_hash,
    )
    entry.hash = entry.compute_hash()
    entry.save()
    AuditHead.objects.filter(id=1).update(seq=entry.seq, last_hash=entry.hash)
    return entry


def audit_act(
    *,
    act: Act,
    actor: Actor,
    action: str,
    object_type: str,
    object_id: str,
    at_ms: int,
    work_item: WorkItem | None = None,
    reason: str = "",
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    request_id: str = "",
) -> AuditEntry:
    """Record an act by an actor: who, and in which role the authority allowed it."""
    return audit_record(
        at_ms=at_ms,
        actor_user_id=actor.user_id,
        actor_name=actor.name,
        actor_role=audit_role(act, actor),
        action=action,
        object_type=object_type,
        object_id=object_id,
        work_item=work_item,
        reason=reason,
        before=before,
        after=after,
        request_id=request_id,
    )


def audit_verify() -> tuple[int, list[str]]:
    """Walk the chain in order; return (entries checked, problems found)."""
    problems: list[str] = []
    prev = "0" * 64
    expected_seq = 1
    count = 0
    for entry in AuditEntry.objects.order_by("seq").iterator(chunk_size=2000):
        count += 1
        if entry.seq != expected_seq:
            problems.append(f"seq {entry.seq}: expected {expected_seq} (an entry is missing)")
        if entry.prev_hash != prev:
            problems.append(f"seq {entry.seq}: prev_hash does not match the previous entry")
        if entry.compute_hash() != entry.hash:
            problems.append(f"seq {entry.seq}: content does not match its hash (edited)")
        prev = entry.hash
        expected_seq = entry.seq + 1
    head = AuditHead.objects.filter(id=1).first()
    if head and count and head.last_hash != prev:
        problems.append("the head does not point at the last entry (entries removed at the end)")
    return count, problems
