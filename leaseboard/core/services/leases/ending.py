"""Ending leases: the one place a lease ends early (release, revoke, hand back), and the
one expiry path for sweeps and for lazy expiry at acquire, renew or effect time."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from django.db import DEFAULT_DB_ALIAS, connections, transaction

from leaseboard.core import sql_batch
from leaseboard.core.authority import Actor, authorize
from leaseboard.core.clock import db_now_ms
from leaseboard.core.locking import WORK_AND_HOLDER, work_item_locked
from leaseboard.core.models import Alert, Executor, Lease, WorkItem
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.core.services.alert_resolution import EndedLease
from leaseboard.core.services.alerts import (
    EXPIRY_KINDS,
    BurstJoins,
    alerts_fold_written,
    alerts_resolve,
    expiry_alert_words,
    lease_alert_key,
    reconciliation_alerts_open,
)
from leaseboard.core.services.audit import audit_act
from leaseboard.core.services.leases.base import (
    executor_id_of,
    fence_on_early_end,
    lease_event_record,
    parse_lease_id,
)
from leaseboard.core.services.leases.holding import held_lease_locked
from leaseboard.core.signals import alerts_opened
from leaseboard.core.tracing import Decision, decided
from leaseboard.domain.authority import Act
from leaseboard.domain.certainty import Certainty, LeaseTimes, state_at
from leaseboard.domain.errors import (
    ValidationFailed,
)
from leaseboard.domain.vocabulary import reason_checked


def lease_end_locked(
    *,
    lease: Lease,
    state: str,
    now_ms: int,
    reason: str,
    actor_id: int | None = None,
    detail: dict[str, Any] | None = None,
) -> Lease:
    """End a live lease (already locked by the caller) and record the event. The caller
    has asked the authority; this is the one place a lease is ended early, so the one
    place its `fenced_until` is recorded: until the effect tokens still open under it (or
    inherited by it) have expired, no acquire may grant the work item again."""
    if lease.state not in LIVE_STATES:
        raise RuntimeError(f"lease {lease.id} is already {lease.state}")
    if state == Lease.State.EXPIRED:
        leases_expire_locked([lease], now_ms)
        return lease
    lease.state = state
    lease.ended_at_ms = now_ms
    lease.end_reason = reason[:300]
    lease.ended_by_id = actor_id
    lease.fenced_until_ms = fence_on_early_end(lease, now_ms)
    # Keyed by the work item as well as the id: the shard a Citus deployment keeps it on
    # (tests/architecture/test_sharding.py).
    Lease.objects.filter(id=lease.id, work_item_id=lease.work_item_id).update(
        state=state,
        ended_at_ms=now_ms,
        end_reason=lease.end_reason,
        ended_by_id=actor_id,
        fenced_until_ms=lease.fenced_until_ms,
    )
    fence = {"fenced_until_ms": lease.fenced_until_ms} if lease.fenced_until_ms > now_ms else {}
    lease_event_record(
        lease,
        state,
        at_ms=now_ms,
        actor_id=actor_id,
        detail={"reason": reason[:300], **fence, **(detail or {})},
    )
    return lease


class Expiring(NamedTuple):
    """What expiring a lease reads of it: the version its caller read (the write is a
    compare-and-set on it) and its holder's name and kind (the alert's words). A sweep's
    claimed row has these fields too."""

    id: Any
    work_item_id: int
    state: str
    epoch: int
    renewed_at_ms: int
    expires_at_ms: int
    due_at_ms: int
    holder_name: str
    holder_kind: str


def leases_expire_locked(
    leases: list[Lease],
    now_ms: int,
    outage_of: Callable[[Any], dict[str, Any] | None] | None = None,
) -> list[int]:
    """Expire live leases the caller has locked (`lease_rows_expire_locked`, the one
    expiry path) and bring the objects up to date. Returns the alert ids opened now."""
    if not leases:
        return []
    rows = [
        Expiring._make(
            [lease.id, *sql_batch.lease_version(lease), lease.holder.name, lease.holder.kind]
        )
        for lease in leases
    ]
    expired, opened = lease_rows_expire_locked(rows, now_ms, outage_of)
    for lease in leases:
        if lease.id in expired:
            lease.state = Lease.State.EXPIRED
            lease.ended_at_ms = expired[lease.id]
            lease.end_reason = sql_batch.EXPIRE_REASON
            lease.ended_by = None
    return [alert_id for alert_id, _, _ in opened]


def lease_rows_expire_locked(
    rows: Sequence[Expiring],
    now_ms: int,
    outage_of: Callable[[Any], dict[str, Any] | None] | None = None,
    bursts: BurstJoins | None = None,
) -> tuple[dict[Any, int], list[tuple[int, str, int | None]]]:
    """The one expiry path, for sweeps and for lazy expiry at acquire, renew or effect
    time: expire the live leases the caller has locked that are still at the version it
    read, in one statement for the batch on PostgreSQL (core.sql_batch.lease_expire_mark:
    state, the EXPIRED event dated when validity ended, the jeopardy alerts it supersedes
    resolved, one expiry or standing-lapsed alert each), then fold the alerts and raise
    the needs_reconciliation ones. Rows, not Lease objects: a storm's batch never builds a
    model instance. (The lock delay needs no write: an acquire derives it from the latest
    lease, so expiry never locks the work item row, which would invert the work item ->
    lease lock order.) `outage_of` (the sweeps') names a database outage as an expiry's
    cause. `bursts` (the sweeps'): the open burst each lease's alert is born folded into
    (alert_bursts.burst_joins_plan). Returns each expired lease's ended_at_ms by id, and
    (id, kind, due time) of each alert opened now."""
    if not rows:
        return {}, []
    conn = connections[DEFAULT_DB_ALIAS]  # looked up once, not per value
    pk = Lease._meta.pk
    by_id = {row.id: row for row in rows}
    values = _expire_params(conn, rows, now_ms, outage_of, bursts)
    ended: list[EndedLease] = []
    opened: list[tuple[int, str, int | None]] = []
    members: dict[int, list[int]] = {}  # born folded into an open burst
    with conn.cursor() as cursor:
        for statement in sql_batch.lease_expire_mark(conn.vendor, len(rows)):
            cursor.execute(statement, values)
            for what, row_id, _, at_ms, kind, burst in cursor.fetchall():
                if what == "alert":
                    opened.append((int(row_id), kind, at_ms))
                    if burst is not None:
                        members.setdefault(int(burst), []).append(int(row_id))
                    continue
                row = by_id[pk.to_python(row_id)]
                ended.append(
                    EndedLease(
                        row.id,
                        row.work_item_id,
                        row.epoch,
                        Lease.State.EXPIRED.value,
                        at_ms,
                        row.holder_name,
                        row.holder_kind,
                    )
                )
    # Recurrences of one agent's expiry fold into its open incident, and a burst across
    # agents into one incident of the queue: counted as opened, notified once.
    notify = alerts_fold_written(
        [alert_id for alert_id, _, _ in opened], members, bursts, EXPIRY_KINDS, now_ms
    )
    if notify:
        alerts_opened.send(sender=Alert, alert_ids=notify)
    if reconciling := reconciliation_alerts_open(ended, now_ms):
        opened += list(
            Alert.objects.filter(id__in=reconciling).values_list("id", "kind", "due_at_ms")
        )
    return {lease.id: lease.ended_at_ms or now_ms for lease in ended}, opened


def _expire_params(
    conn: Any,
    rows: Sequence[Expiring],
    now_ms: int,
    outage_of: Callable[[Any], dict[str, Any] | None] | None,
    bursts: BurstJoins | None = None,
) -> list[Any]:
    """`lease_expire_mark`'s parameters: each row's version, its alert's words, and the
    burst its alert is born folded into (or None)."""
    pk = Lease._meta.pk
    params: list[list[Any]] = []
    for row in rows:
        kind, message, detail = expiry_alert_words(
            row.holder_name, row.holder_kind, outage_of(row) if outage_of else None
        )
        params.append(
            [
                pk.get_db_prep_value(row.id, conn),
                row.work_item_id,
                row.state,
                row.epoch,
                row.renewed_at_ms,
                row.expires_at_ms,
                row.due_at_ms,
                kind,
                lease_alert_key(kind, row.id, row.epoch),
                lease_alert_key(Alert.Kind.JEOPARDY.value, row.id, row.epoch),
                message,
                json.dumps(detail),
                now_ms,
                bursts.incident_of.get(row.id) if bursts else None,
            ]
        )
    return sql_batch.keyed_params(conn.vendor, params, [row.work_item_id for row in rows])


def lease_expire_if_due_locked(lease: Lease, now_ms: int) -> bool:
    """Materialize an expiry that time has already decided. True if the lease ended now."""
    times = LeaseTimes(Certainty(lease.state), lease.jeopardy_at_ms, lease.expires_at_ms)
    if lease.state in LIVE_STATES and state_at(times, now_ms) is Certainty.EXPIRED:
        lease_end_locked(
            lease=lease, state=Lease.State.EXPIRED, now_ms=now_ms, reason=sql_batch.EXPIRE_REASON
        )
        # The write is a compare-and-set on the version read: say what it did.
        return lease.state == Lease.State.EXPIRED
    return False


def _ended(span: Decision, lease: Lease) -> None:
    span.note(decision=lease.state, work_key=lease.work_item.key)
    span.lease(lease)


@decided(
    "leaseboard.lease.release",
    about=lambda kw: {"lease_id": str(kw["lease_id"]), "epoch": kw["epoch"]},
    result=_ended,
)
@transaction.atomic(durable=True)
def lease_release(*, lease_id: Any, executor: Executor, epoch: int) -> Lease:
    """Idempotent compare-and-set: releases exactly this lease at this epoch, never a newer
    grant. Releasing an already-released lease answers as a success."""
    lease, now = held_lease_locked(
        act=Act.RELEASE, lease_id=lease_id, executor=executor, epoch=epoch, related=WORK_AND_HOLDER
    )
    if lease.state == Lease.State.RELEASED:
        return lease  # a retried release
    lease_end_locked(
        lease=lease,
        state=Lease.State.RELEASED,
        now_ms=now,
        reason="released by holder",
        actor_id=executor.id,
    )
    reconciliation_alerts_open([lease], now)
    return lease


def lease_revoke_locked(
    *,
    lease: Lease,
    actor: Actor,
    now_ms: int,
    reason: str,
    detail: dict[str, Any] | None = None,
) -> Lease:
    """Revoke a live lease inside a caller's transaction (takeover approval, operator
    revoke, quarantine). Old-epoch effects are refused from the moment the caller commits."""
    if not reason.strip():
        raise ValidationFailed("a revocation needs a reason", param="reason")
    authorize(Act.REVOKE, actor, now_ms=now_ms, lease=lease)
    lease_end_locked(
        lease=lease,
        state=Lease.State.REVOKED,
        now_ms=now_ms,
        reason=reason,
        actor_id=executor_id_of(actor),
        detail=detail,
    )
    alerts_resolve(lease=lease, now_ms=now_ms)
    return lease


def lease_hand_back_locked(
    *, lease: Lease, actor: Actor, epoch: int, current_epoch: int, now_ms: int
) -> Lease:
    """End human standing to the agent pool: the next agent acquire raises the epoch."""
    authorize(
        Act.HAND_BACK, actor, now_ms=now_ms, lease=lease, epoch=epoch, current_epoch=current_epoch
    )
    return lease_end_locked(
        lease=lease,
        state=Lease.State.RELEASED,
        now_ms=now_ms,
        reason="handed back to the agent pool",
        actor_id=executor_id_of(actor),
    )


def revoke_reason(reason_category: str, reason_text: str) -> str:
    """The end reason an operator's revoke records (and the holder's next renew is told)."""
    return f"{reason_category}: {reason_text}"


# deliberate: a keyword-only signature (services own every write, keyword-only).
def lease_revoke_audited_locked(
    *,
    item: WorkItem,
    lease: Lease,
    actor: Actor,
    reason_category: str,
    reason_text: str,
    request_id: str = "",
    reason: str = "",
    detail: dict[str, Any] | None = None,
) -> Lease:
    """An operator's revoke of one lease, with its audit entry, inside the caller's
    transaction (which holds the work item's lock, then the lease's). Shared by the single
    revoke, the bulk revoke and the quarantine; `reason` overrides the recorded text."""
    now = db_now_ms()
    before = {"state": lease.state, "epoch": lease.epoch, "holder": lease.holder.name}
    structured = {"reason_category": reason_category, "reason_text": reason_text, **(detail or {})}
    recorded = reason or revoke_reason(reason_category, reason_text)
    lease_revoke_locked(lease=lease, actor=actor, now_ms=now, reason=recorded, detail=structured)
    # The operator's revoke leaves the item to the pool: blocked if effects have no outcome.
    reconciliation_alerts_open([lease], now)
    # deliberate: audit_act's keywords one a line; each act records its own before and after.
    audit_act(
        act=Act.REVOKE,
        actor=actor,
        action="lease.revoke",
        object_type="lease",
        object_id=str(lease.id),
        work_item=item,
        at_ms=now,
        reason=recorded,
        before=before,
        after={"state": lease.state, "epoch": item.epoch, **structured},
        request_id=request_id,
    )
    return lease


def lease_for_revoke_locked(lease_id: Any) -> tuple[WorkItem, Lease]:
    """Lock a lease's work item, then the lease (the core's lock order)."""
    lid = parse_lease_id(lease_id)
    item = work_item_locked(Lease, lid, what="lease")
    lease = (
        Lease.objects.select_for_update(no_key=True, of=("self",))
        .select_related("holder")
        .get(id=lid)
    )
    return item, lease


@decided(
    "leaseboard.lease.revoke",
    about=lambda kw: {"lease_id": str(kw["lease_id"]), "reason_category": kw["reason_category"]},
    result=_ended,
)
@transaction.atomic(durable=True)
def lease_revoke(
    *,
    lease_id: Any,
    actor: Actor,
    reason_category: str,
    reason_text: str,
    request_id: str = "",
) -> Lease:
    """A supervisor revokes a live lease with a structured reason (category and text); the
    work item returns to the pool and the holder's next renew answers `lease_revoked` with
    that reason."""
    text = reason_checked(reason_category, reason_text, what="a revocation")
    item, lease = lease_for_revoke_locked(lease_id)
    return lease_revoke_audited_locked(
        item=item,
        lease=lease,
        actor=actor,
        reason_category=reason_category,
        reason_text=text,
        request_id=request_id,
    )
