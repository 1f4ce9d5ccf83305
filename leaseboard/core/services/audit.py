"""Append to the keyed audit chain (in the caller's transaction), verify it, checkpoint it.

`audit_record`/`audit_act` write; `audit_verify` walks the whole chain with the keys and
against the signed checkpoints; `audit_checkpoint` verifies what is new since the last
checkpoint and signs the new head into the store outside the database (docs/audit.md).
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypedDict, Unpack

from django.db import transaction

from leaseboard.core.authority import Actor, audit_role
from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import AuditEntry, AuditHead, WorkItem
from leaseboard.core.models.audit import GENESIS, AuditKeyring, entry_mac
from leaseboard.core.services.audit_checkpoints import (
    Checkpoint,
    checkpoint_append,
    checkpoint_dir,
    checkpoints_read,
)
from leaseboard.core.tracing import current_trace_id
from leaseboard.domain.authority import Act

# The first keyed entry after entries from before the keyed chain (migration 0004).
ANCHOR_ACTION = "audit.anchor"


class Said(TypedDict, total=False):
    """What an audit entry may tell besides who did what to which object, when: the work
    item, the reason, the object before and after, the request's id."""

    work_item: WorkItem | None
    reason: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    request_id: str


def audit_record(
    *,
    at_ms: int,
    actor_name: str,
    actor_role: str,
    action: str,
    object_type: str,
    object_id: str,
    actor_user_id: int | None = None,
    **said: Unpack[Said],
) -> AuditEntry:
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit_record must run inside the transaction of the change it records")
    keyring = AuditKeyring.from_settings()
    # The head row serializes writers so the chain never forks.
    head, _ = AuditHead.objects.select_for_update(no_key=True).get_or_create(id=1)
    entry = AuditEntry(
        seq=head.seq + 1,
        at_ms=at_ms,
        actor_user_id=actor_user_id,
        actor_name=actor_name[:150],
        actor_role=actor_role,
        action=action,
        object_type=object_type,
        object_id=str(object_id)[:200],
        work_item=said.get("work_item"),
        reason=said.get("reason", "")[:1000],
        before=said.get("before") or {},
        after=said.get("after") or {},
        request_id=said.get("request_id", "")[:64],
        trace_id=current_trace_id(),
        key_id=keyring.current_id,
        prev_hash=head.last_hash,
    )
    entry.hash = entry_mac(keyring.current_key, entry.body())
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
    **said: Unpack[Said],
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
        **said,
    )


def audit_admin(
    action: str,
    object_type: str,
    object_id: object,
    *,
    actor_name: str,
    **said: Unpack[Said],
) -> AuditEntry:
    """Record an administrator's act from outside a signed-in session (a management
    command, named by `actor_name`), dated by the database clock now."""
    return audit_record(
        at_ms=db_now_ms(),
        actor_name=actor_name,
        actor_role="admin",
        action=action,
        object_type=object_type,
        object_id=str(object_id),
        **said,
    )


@dataclass
class ChainWalk:
    """Feed entries in seq order; collects one problem line per break found."""

    keyring: AuditKeyring
    checkpoints: list[Checkpoint] = field(default_factory=list)
    prev: str = GENESIS
    expected_seq: int = 1
    count: int = 0
    keyed: bool = False  # a keyed entry has been seen: no unkeyed one may follow
    unkeyed: int = 0
    last_seq: int = 0
    problems: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._at: dict[int, list[Checkpoint]] = defaultdict(list)
        for cp in self.checkpoints:
            self._at[cp.seq].append(cp)
        self._matched: set[int] = set()

    def feed(self, entry: AuditEntry) -> None:
        self.count += 1
        seq = entry.seq
        if seq != self.expected_seq:
            self.problems.append(f"seq {seq}: expected seq {self.expected_seq} (entries missing)")
        if entry.prev_hash != self.prev:
            self.problems.append(f"seq {seq}: prev_hash does not match the previous entry")
        if not entry.key_id:
            if self.keyed:
                self.problems.append(
                    f"seq {seq}: unkeyed entry after the keyed chain began "
                    "(written or rewritten without the audit key)"
                )
            elif not hmac.compare_digest(hashlib.sha256(entry.canonical()).hexdigest(), entry.hash):
                self.problems.append(f"seq {seq}: content does not match its hash (edited)")
            self.unkeyed += 1
        else:
            key = self.keyring.keys.get(entry.key_id)
            if key is None:
                self.problems.append(
                    f"seq {seq}: made with unknown audit key id {entry.key_id!r} "
                    "(forged, or its key is not configured)"
                )
            elif not hmac.compare_digest(entry_mac(key, entry.body()), entry.hash):
                self.problems.append(
                    f"seq {seq}: content does not match its MAC "
                    "(edited, or re-hashed without the audit key)"
                )
            if not self.keyed and self.unkeyed and entry.action != ANCHOR_ACTION:
                self.problems.append(
                    f"seq {seq}: the first keyed entry after {self.unkeyed} unkeyed ones "
                    "is not the chain's anchor"
                )
            self.keyed = True
        for cp in self._at.get(seq, ()):
            self._matched.add(seq)
            if cp.head != entry.hash:
                self.problems.append(
                    f"seq {seq}: not the entry {cp.describe()} recorded (the chain was rewritten)"
                )
            elif cp.count != self.count:
                self.problems.append(
                    f"seq {seq}: {self.count} entries up to here, but {cp.describe()} "
                    "recorded a different count"
                )
        self.prev = entry.hash
        self.expected_seq = seq + 1
        self.last_seq = seq

    def finish(self) -> list[str]:
        if self.unkeyed and not self.keyed:
            self.problems.append(
                f"{self.unkeyed} unkeyed entries and no keyed anchor after them "
                "(the keyed part was removed, or `manage.py migrate` has not run)"
            )
        newest = max(self.checkpoints, key=lambda cp: cp.seq, default=None)
        if newest is not None and self.last_seq < newest.seq:
            if self.count == 0:
                self.problems.append(
                    f"the log is empty, but {newest.describe()} recorded entries: "
                    "the table was truncated or emptied"
                )
            else:
                self.problems.append(
                    f"the log ends at seq {self.last_seq}, before {newest.describe()}: "
                    "entries were deleted from the end"
                )
        for cp in self.checkpoints:
            if cp.seq <= self.last_seq and cp.seq not in self._matched:
                self.problems.append(f"no entry at seq {cp.seq}, which {cp.describe()} recorded")
        return self.problems


@dataclass
class AuditVerdict:
    count: int
    problems: list[str]
    checkpoints: int
    newest: Checkpoint | None
    # Checkpoints expected but missing from the store (see `checkpoints_missing`): kept
    # apart from `problems` so `verify_audit --without-checkpoints` can set them aside.
    missing: list[str] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return not self.problems and not self.missing


def checkpoint_grace_ms() -> int:
    """How old an entry may be and still be covered by no checkpoint: two beat intervals and
    a minute (a checkpoint run may be late), or a day and two hours when checkpoints come
    from cron (LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S=0; LEASEBOARD_AUDIT_CHECKPOINT_GRACE_S
    sets it)."""
    from django.conf import settings

    configured = getattr(settings, "LEASEBOARD_AUDIT_CHECKPOINT_GRACE_S", None)
    if configured:
        return int(configured) * 1000
    interval = settings.LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S
    return (2 * interval + 60) * 1000 if interval else 26 * 3600 * 1000


def checkpoints_missing(
    *, head: AuditHead | None, newest: Checkpoint | None, now_ms: int, store: str
) -> list[str]:
    """Checkpoints that should be in the store and are not: the database recorded writing
    one past the newest the store holds (the store was removed, emptied or replaced), or an
    entry older than the grace is covered by none (checkpoints have stopped, or that too).
    Entries from before the keyed chain began (its anchor) are not expected to be."""
    out: list[str] = []
    covered = newest.seq if newest is not None else 0
    if head is not None and head.checkpoint_seq > covered:
        when = (
            datetime.fromtimestamp(head.checkpoint_at_ms / 1000, UTC).isoformat(timespec="seconds")
            if head.checkpoint_at_ms
            else "?"
        )
        out.append(
            f"a checkpoint of seq {head.checkpoint_seq} was written at {when}, but the store "
            f"({store}) holds {'none' if newest is None else f'none past seq {covered}'}: "
            "it was removed, emptied or replaced"
        )
    first = (
        AuditEntry.objects.filter(seq__gt=covered).order_by("seq").values("seq", "at_ms").first()
    )
    if first is None:
        return out
    anchor = AuditEntry.objects.filter(action=ANCHOR_ACTION).values_list("at_ms", flat=True)
    since = max(first["at_ms"], anchor.first() or 0)
    grace = checkpoint_grace_ms()
    if now_ms - since > grace:
        out.append(
            f"entries from seq {first['seq']} on (the first written "
            f"{(now_ms - since) // 1000} s ago) are covered by no checkpoint in {store}, "
            f"though one is expected within {grace // 1000} s: run `manage.py audit_checkpoint` "
            "(is beat, or its cron job, running?), or the store was removed"
        )
    return out


def audit_verify(*, keyring: AuditKeyring | None = None) -> AuditVerdict:
    """Walk the whole chain in order with the audit keys and against every valid signed
    checkpoint; return what was checked and one line per problem."""
    keyring = keyring or AuditKeyring.from_settings()
    checkpoints, problems = checkpoints_read(keyring=keyring)
    head = AuditHead.objects.filter(id=1).first()
    upper = AuditEntry.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
    walk = ChainWalk(keyring=keyring, checkpoints=checkpoints)
    head_hash: str | None = None
    for entry in AuditEntry.objects.filter(seq__lte=upper).order_by("seq").iterator(2000):
        walk.feed(entry)
        if head is not None and entry.seq == head.seq:
            head_hash = entry.hash
    problems += walk.finish()
    if head is not None and head.seq and head_hash != head.last_hash:
        problems.append(
            f"the head (seq {head.seq}) does not point at an entry of the chain "
            "(entries removed at the end)"
        )
    newest = max(checkpoints, key=lambda cp: cp.seq, default=None)
    missing = checkpoints_missing(
        head=head, newest=newest, now_ms=db_now_ms(), store=str(checkpoint_dir())
    )
    return AuditVerdict(walk.count, problems, len(checkpoints), newest, missing)


@dataclass
class CheckpointResult:
    written: Checkpoint | None
    problems: list[str]
    note: str = ""


def audit_checkpoint(*, keyring: AuditKeyring | None = None) -> CheckpointResult:
    """Verify the entries added since the newest valid checkpoint and, if they are sound,
    sign the new head into the checkpoint store. Refuses to sign a broken chain."""
    keyring = keyring or AuditKeyring.from_settings()
    checkpoints, file_problems = checkpoints_read(keyring=keyring)
    newest = max(checkpoints, key=lambda cp: cp.seq, default=None)
    last = AuditEntry.objects.order_by("-seq").values("seq", "hash").first()
    if last is not None and newest is not None and last["seq"] == newest.seq:
        if last["hash"] != newest.head:
            return CheckpointResult(
                None, [f"seq {newest.seq}: not the entry {newest.describe()} recorded"]
            )
        return CheckpointResult(None, file_problems, f"no new entries since seq {newest.seq}")
    walk = ChainWalk(keyring=keyring, checkpoints=[newest] if newest else [])
    entries = AuditEntry.objects.order_by("seq")
    if newest is not None:
        # Start from the entry the newest checkpoint recorded; it must still be there.
        start = AuditEntry.objects.filter(seq=newest.seq).first()
        if start is not None:
            walk = ChainWalk(
                keyring=keyring,
                checkpoints=[newest],
                expected_seq=newest.seq,
                count=newest.count - 1,
                prev=start.prev_hash,
                keyed=True,
            )
            entries = entries.filter(seq__gte=newest.seq)
    if last is not None:
        for entry in entries.filter(seq__lte=last["seq"]).iterator(2000):
            walk.feed(entry)
    problems = walk.finish()
    if problems:
        return CheckpointResult(None, problems + file_problems, "chain broken: not signed")
    if last is None:
        return CheckpointResult(None, file_problems, "the audit log is empty")
    now = db_now_ms()
    written = checkpoint_append(
        seq=last["seq"], head=last["hash"], count=walk.count, at_ms=now, keyring=keyring
    )
    # Remembered in the database too: from now on, a store without it is a store removed.
    AuditHead.objects.filter(id=1, checkpoint_seq__lt=written.seq).update(
        checkpoint_seq=written.seq, checkpoint_at_ms=now
    )
    return CheckpointResult(written, file_problems)


def audit_checkpoint_location() -> str:
    return str(checkpoint_dir())


def cli_actor_name() -> str:
    """Who runs a management command, for the audit log: "cli:<OS user>" (or "cli")."""
    try:
        return f"cli:{getpass.getuser()}"[:150]
    except (KeyError, OSError):  # no passwd entry, e.g. an arbitrary container uid
        return "cli"
