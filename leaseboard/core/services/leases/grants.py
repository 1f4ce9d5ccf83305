"""Grants: acquire (with its gates: leased, the fence, reconciliation, lifetime cap)
and the one grant primitive that raises the epoch, used by agent acquires, takeovers and
assignments. Lock order: work item, then lease; a rolled-back grant uses up no epoch.

The fence (docs/design.md §5): an acquire waits (`lock_delay`) until the previous holder's open
effect tokens are dead plus the skew allowance. A grant a person makes (takeover approval,
break-glass, assignment) happens at once but inherits the fence: no effect is authorized
under it before the fence has passed (docs/fencing.md)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, QuerySet, Subquery

from leaseboard.core import sql
from leaseboard.core.authority import Actor, authorize
from leaseboard.core.clock import DbNowMs, db_now_ms
from leaseboard.core.compiled import CompiledRead, attnames
from leaseboard.core.models import Checkpoint, Executor, Lease, LeaseEvent, Queue, WorkItem
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.core.services.envelopes import envelope_grant_check_locked
from leaseboard.core.services.epoch_notices import epoch_notices_open, recipients_listening
from leaseboard.core.services.fencing import fencing_token_issue
from leaseboard.core.services.leases.base import (
    OPEN_EFFECT,
    executor_id_of,
    next_grant_at,
    next_grant_at_sql,
    skew_ms,
    timing_for,
)
from leaseboard.core.services.leases.ending import lease_end_locked, lease_expire_if_due_locked
from leaseboard.core.tracing import Decision, decided
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import (
    LockDelay,
    NeedsReconciliation,
    NotFound,
    Unauthenticated,
    ValidationFailed,
    WorkLeased,
    WorkNotAdmitted,
)
from leaseboard.domain.fencing import token_expiry_ms


@dataclass(frozen=True)
class Grant:
    lease: Lease
    fencing_token: str
    checkpoint: Checkpoint | None
    now_ms: int

    @property
    def expires_in_ms(self) -> int:
        return max(0, self.lease.expires_at_ms - self.now_ms)


def holder_active_checked(holder: Executor, grant_kind: str) -> None:
    """Refuse a grant to an agent whose credential is deactivated (a quarantine), even when
    its request got past a token cached before the quarantine."""
    with connection.cursor() as cursor:
        cursor.execute(sql.executor_active_shared(connection.vendor), [holder.id])
        row = cursor.fetchone()
    if row is None or not row[0]:
        refuse_inactive(holder, grant_kind)


def refuse_inactive(holder: Executor, grant_kind: str) -> None:
    if grant_kind == Lease.GrantKind.ACQUIRE:
        raise Unauthenticated("this agent's credential is deactivated (quarantined)")
    raise ValidationFailed(f"agent {holder.name!r} is deactivated (quarantined)", param="agent")


@functools.cache
def _grant_fields(model: type[Lease | LeaseEvent]) -> list[Any]:
    fields = {f.attname: f for f in model._meta.concrete_fields}
    return [fields[name] for name in sql.grant_columns(model)]


def _values(obj: Lease | LeaseEvent, conn: Any) -> list[object]:
    return [f.get_db_prep_save(getattr(obj, f.attname), conn) for f in _grant_fields(type(obj))]


def grant_write(conn: Any, lease: Lease, event: LeaseEvent, *, require_active: bool) -> bool:
    """A grant's writes in one statement on `conn` (core.sql.lease_grant): the holder's
    `is_active` under a share lock (when `require_active`), the work item's epoch to the
    lease's, the lease, its `granted` event. False, having written nothing, when the
    holder is deactivated or missing."""
    groups: list[list[Any]] = [[lease.holder_id, require_active], [lease.epoch, lease.work_item_id]]
    groups += [_values(lease, conn), _values(event, conn)]
    statements = sql.lease_grant(conn.vendor)
    with sql.prepared_cursor(conn) as cursor:
        if len(statements) == 1:
            cursor.execute(statements[0], [value for group in groups for value in group])
        else:  # the holder's check first, then the writes
            check, *writes = statements
            cursor.execute(check, groups[0])
            if cursor.fetchone() is None:
                return False
            for statement, params in zip(writes, groups[1:], strict=True):
                cursor.execute(statement, params)
        row = cursor.fetchone()
    if row is None:
        return False
    event.id, lease.generation = row[0], int(row[1])
    for obj in (lease, event):
        obj._state.adding = False
        obj._state.db = conn.alias
    return True


def lease_grant_locked(
    *,
    item: WorkItem,
    holder: Executor,
    now_ms: int,
    grant_kind: str = Lease.GrantKind.ACQUIRE,
    ttl_ms: int | None = None,
    jeopardy_after_ms: int | None = None,
    max_lifetime_ms: int | None = None,
    takeover_reason: str = "",
    actor_id: int | None = None,
    fenced_until_ms: int = 0,
    notify_recipients: bool = True,
) -> Lease:
    """Raise the epoch and create the lease. The caller holds the work item's row lock and
    has ended any live lease; the partial unique constraint backs that up. A grant made
    before the fence has passed carries it (`fenced_until_ms`). Recipients with an
    epoch-advance webhook get a notice row in this transaction (`notify_recipients=False`
    when the caller already knows none listens). An agent must be active (not
    quarantined), read under a share lock, in the grant's one statement (core.sql.lease_grant)."""
    policy = timing_for(item, ttl_ms, max_lifetime_ms)
    jeopardy_after = (
        jeopardy_after_ms if jeopardy_after_ms is not None else policy.jeopardy_after_ms
    )
    lifetime = policy.max_lifetime_ms
    assert policy.renew_after_ms is not None and jeopardy_after is not None
    max_expires = now_ms + max(lifetime, policy.ttl_ms)
    expires = min(now_ms + policy.ttl_ms, max_expires)
    jeopardy_at = min(now_ms + jeopardy_after, expires)
    # deliberate: the Lease row named field by field, the grant's one write (core.sql.lease_grant).
    lease = Lease(
        work_item=item,
        holder=holder,
        epoch=item.epoch + 1,
        state=Lease.State.ACTIVE,
        grant_kind=grant_kind,
        granted_at_ms=now_ms,
        renewed_at_ms=now_ms,
        jeopardy_at_ms=jeopardy_at,
        expires_at_ms=expires,
        max_expires_at_ms=max_expires,
        due_at_ms=jeopardy_at,
        ttl_ms=policy.ttl_ms,
        renew_after_ms=policy.renew_after_ms,
        jeopardy_after_ms=jeopardy_after,
        lock_delay_ms=policy.lock_delay_ms,
        fenced_until_ms=fenced_until_ms if fenced_until_ms > now_ms else 0,
        takeover_reason=takeover_reason[:1000],
        # The work item's hold, copied (leaseboard.core.services.holds): a grant a person
        # made on a held item (an assignment from standing) is held as the item is.
        held_at_ms=item.held_at_ms,
        hold_reason=item.hold_reason,
        held_by_id=item.held_by_id,
    )
    event = LeaseEvent(
        lease=lease,
        work_item=item,
        epoch=lease.epoch,
        kind=LeaseEvent.Kind.GRANTED,
        at_ms=now_ms,
        actor_id=actor_id or holder.id,
        detail={
            "grant_kind": grant_kind,
            "holder": holder.name,
            "ttl_ms": policy.ttl_ms,
            **({"fenced_until_ms": lease.fenced_until_ms} if lease.fenced_until_ms else {}),
        },
    )
    if not grant_write(connection, lease, event, require_active=holder.kind == Executor.Kind.AGENT):
        refuse_inactive(holder, grant_kind)
    item.epoch = lease.epoch
    if notify_recipients:
        epoch_notices_open(work_item_id=item.id, epoch=item.epoch, generation=lease.generation)
    return lease


def fence_of_latest_locked(item: WorkItem) -> int:
    """The fence the work item's latest lease sets for the next grant (0: none); for the
    grants a person makes, which inherit it instead of waiting. The caller holds the work
    item's lock and has ended the live lease, if any."""
    latest = (
        Lease.objects.filter(work_item=item)
        .only("state", "expires_at_ms", "lock_delay_ms", "fenced_until_ms")
        .order_by("-epoch")
        .first()
    )
    return next_grant_at(latest) if latest is not None else 0


def live_lease_locked(item: WorkItem) -> Lease | None:
    return (
        Lease.objects.select_for_update(no_key=True, of=("self",))
        .select_related("holder")
        .filter(work_item=item, state__in=LIVE_STATES)
        .first()
    )


def _gates_query(pk: int) -> QuerySet[Any, Any]:
    """The acquire's gate read: the clock, the live lease, the reconciliation gate, the
    latest checkpoint, the fence the latest grant left, whether any recipient listens."""
    from leaseboard.core.models import Effect

    return WorkItem.objects.filter(pk=pk).values_list(
        DbNowMs(),
        Subquery(
            Lease.objects.filter(work_item=OuterRef("pk"), state__in=LIVE_STATES).values("id")[:1]
        ),
        Exists(Effect.objects.filter(OPEN_EFFECT, work_item=OuterRef("pk"))),
        Subquery(
            Checkpoint.objects.filter(work_item=OuterRef("pk")).order_by("-seq").values("id")[:1]
        ),
        # The fence the latest grant left: its lock delay after an expiry, or the
        # `fenced_until` an early end recorded.
        Subquery(
            Lease.objects.filter(work_item=OuterRef("pk"))
            .order_by("-epoch")
            .annotate(until=next_grant_at_sql())
            .values("until")[:1]
        ),
        recipients_listening(),
    )


# The gate read, compiled once per process (core.compiled): building and compiling that
# queryset cost more CPU than the rest of an acquire together.
_GATES = CompiledRead(_gates_query, (-7_212_345_678,), WorkItem, varies_with=skew_ms)


def _gates(pk: int) -> tuple[Any, ...]:
    row = _GATES.values(pk)
    if row is None:
        raise NotFound("no such work item")
    return tuple(row)


# The work item under a row lock, with its queue: the acquire's first statement.
_ITEM_LOCKED = CompiledRead(
    lambda key: (
        WorkItem.objects.select_for_update(no_key=True, of=("self",))
        .filter(key=key)
        .values_list(*attnames(WorkItem), *attnames(Queue, "queue__"))
    ),
    ("sentinel:acquire-work-key",),
    WorkItem,
    related=(("queue", Queue),),
)


def _granted(span: Decision, grant: Grant) -> None:
    span.note(decision="granted")
    span.lease(grant.lease)


@decided("leaseboard.lease.acquire", about=lambda kw: {"work_key": kw["work_key"]}, result=_granted)
@transaction.atomic(durable=True)
def lease_acquire(*, work_key: str, executor: Executor, ttl_ms: int | None = None) -> Grant:
    """An executor takes a work item under a new lease: lock the item, check every gate
    (the credential's queue, a hold, admission and status, a live lease, the reconciliation
    gate, the fence, the envelope), grant, and sign the lease's fencing token.

    One piece: a hot path (docs/benchmarks.md, acquire). Two round trips answer every gate
    question: lock the item, then, in a NEW statement whose snapshot sees whatever committed
    while we waited for the lock, read the clock, the live lease, the reconciliation gate
    and the latest checkpoint (the gate read compiled once, `_GATES`). Subqueries in the
    locking statement would use its pre-wait snapshot: the race test catches that. The gates
    are checked in order on the values those two reads return, then the grant."""
    actor = Actor.of_executor(executor)
    authorize(Act.ACQUIRE, actor)
    found = _ITEM_LOCKED.row(work_key)
    if found is None:
        raise NotFound(f"no work item {work_key!r}")
    item = found[0]
    assert isinstance(item, WorkItem)
    # Under the item's lock: the queue this credential may use, and an operator's hold,
    # which belongs to the item and outlives every lease on it.
    authorize(
        Act.ACQUIRE,
        actor,
        queue=item.queue.name,
        held=item.held_at_ms is not None,
        hold_reason=item.hold_reason,
    )
    gates = _gates(item.pk)
    now, live_lease_id, unreconciled, checkpoint_id, fence_until, listening = gates
    if item.admission != WorkItem.Admission.ADMITTED:
        raise WorkNotAdmitted(
            f"work item {work_key!r} is {item.admission}", admission=item.admission
        )
    if item.status != WorkItem.Status.OPEN:
        raise WorkNotAdmitted(f"work item {work_key!r} is {item.status}", status=item.status)
    if live_lease_id is not None:
        live = live_lease_locked(item)
        # We may have waited for that lease's row (a release or a sweep ending it): read
        # the clock again, or the grant could be dated before the end it waited for.
        now = db_now_ms()
        if live is not None and not lease_expire_if_due_locked(live, now):
            mine = live.holder_id == executor.id
            raise WorkLeased(
                "you already hold this work item under lease " + str(live.id)
                if mine
                else "another executor holds this work item",
                current_epoch=item.epoch,
                holder_kind=live.holder.kind,
                **({"lease_id": str(live.id)} if mine else {}),
            )
        # That lease is the latest grant and has just ended (here, by time, or while we
        # waited for it): its fence is read from what it is now.
        ended = live or Lease.objects.only(
            "state", "expires_at_ms", "lock_delay_ms", "fenced_until_ms"
        ).get(id=live_lease_id)
        fence_until = next_grant_at(ended)
    # The lasting refusal before the passing one: an agent told to wait a second for the
    # fence would only be told next that a human must reconcile first.
    if (
        executor.kind == Executor.Kind.AGENT
        and item.queue.agent_acquire_needs_reconciliation
        and unreconciled
    ):
        raise NeedsReconciliation(
            "effects attempted under an earlier lease have no known outcome; a human must "
            "reconcile them before an agent may take this work again"
        )
    if fence_until and fence_until > now:
        raise LockDelay(
            "the previous holder's fencing tokens may still be accepted by a recipient that "
            "has not seen a newer epoch; grants resume when they have expired",
            retry_after_ms=fence_until - now,
            fenced_until_ms=fence_until,
        )
    envelope_grant_check_locked(item=item, executor=executor, now_ms=now)  # windows, per agent
    lease = lease_grant_locked(
        item=item, holder=executor, now_ms=now, ttl_ms=ttl_ms, notify_recipients=listening
    )
    checkpoint = Checkpoint.objects.filter(id=checkpoint_id).first() if checkpoint_id else None
    # The lease token proves standing, names no effect, and dies with the grant's ttl:
    # recipients refuse it for effects unless configured to accept it (docs/fencing.md).
    token = fencing_token_issue(
        work_key=item.key,
        epoch=lease.epoch,
        generation=lease.generation,
        lease_id=str(lease.id),
        holder=executor.name,
        queue=item.queue.name,
        now_ms=now,
        expires_at_ms=token_expiry_ms(
            lease_expires_at_ms=lease.expires_at_ms,
            now_ms=now,
            max_ttl_ms=settings.FENCING_TOKEN_TTL_MS,
        ),
    )
    return Grant(lease=lease, fencing_token=token, checkpoint=checkpoint, now_ms=now)


def lease_assign_locked(
    *, item: WorkItem, lease: Lease, actor: Actor, epoch: int, agent: Executor, now_ms: int
) -> Lease:
    """End human standing and grant the named agent a lease at a new epoch (the caller
    holds the work item's lock). The agent holds at once; its effects wait for the fence
    the human lease carried or recorded, if any."""
    authorize(Act.ASSIGN, actor, now_ms=now_ms, lease=lease, epoch=epoch, current_epoch=item.epoch)
    by = executor_id_of(actor)
    # deliberate: keyword arguments named one a line; alike in shape only, the values differ.
    lease_end_locked(
        lease=lease,
        state=Lease.State.RELEASED,
        now_ms=now_ms,
        reason=f"assigned to {agent.name}",
        actor_id=by,
    )
    return lease_grant_locked(
        item=item,
        holder=agent,
        now_ms=now_ms,
        grant_kind=Lease.GrantKind.ASSIGN,
        actor_id=by,
        fenced_until_ms=lease.fenced_until_ms,
    )
