"""Lease services: acquire (grant), renew, batch renew, release, checkpoint, revoke.

Lock order everywhere: work item, then lease. Epochs change only inside a grant's
transaction, so a rolled-back grant uses up no epoch. Renew is a single compare-and-set
UPDATE that sets an *absolute* expiry from the database clock.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import BigIntegerField, Case, Exists, F, OuterRef, Subquery, Value, When
from django.db.models.functions import Least

from leaseboard.core import sql
from leaseboard.core.authority import Actor, authorize
from leaseboard.core.clock import DbNowMs, db_now_ms
from leaseboard.core.locking import work_item_locked
from leaseboard.core.models import Alert, Checkpoint, Executor, Lease, LeaseEvent, WorkItem
from leaseboard.core.models.leases import LIVE_STATES, RENEWAL_SLOT, RENEWAL_WINDOW
from leaseboard.core.services.alerts import alerts_open, alerts_resolve, expiry_alert
from leaseboard.core.services.audit import audit_act
from leaseboard.core.services.fencing import fencing_token_issue
from leaseboard.core.services.jsondocs import json_size_checked
from leaseboard.domain.authority import Act
from leaseboard.domain.certainty import Certainty, LeaseTimes, state_at
from leaseboard.domain.errors import (
    LeaseboardError,
    LockDelay,
    NeedsReconciliation,
    NotFound,
    ValidationFailed,
    WorkLeased,
    WorkNotAdmitted,
)
from leaseboard.domain.timing import TimingPolicy, TimingPolicyError


@dataclass(frozen=True)
class Grant:
    lease: Lease
    fencing_token: str
    checkpoint: Checkpoint | None
    now_ms: int

    @property
    def expires_in_ms(self) -> int:
        return max(0, self.lease.expires_at_ms - self.now_ms)


@dataclass(frozen=True)
class Renewal:
    lease_id: uuid.UUID
    epoch: int
    certainty: str
    expires_in_ms: int


def parse_lease_id(raw: Any) -> uuid.UUID:
    try:
        return raw if isinstance(raw, uuid.UUID) else uuid.UUID(str(raw))
    except (ValueError, AttributeError, TypeError):
        raise NotFound(f"no lease {str(raw)[:60]!r}") from None


def timing_for(
    item: WorkItem, ttl_ms: int | None = None, max_lifetime_ms: int | None = None
) -> TimingPolicy:
    """Defaults, then the queue's overrides, then the item's, then the grant's own ttl and
    lifetime (applied together: a long human standing may exceed the queue's lifetime)."""
    try:
        policy = settings.LEASE_DEFAULTS
        if item.queue.timing:
            policy = policy.with_overrides(item.queue.timing)
        if item.timing:
            policy = policy.with_overrides(item.timing)
        grant = {"ttl_ms": ttl_ms, "max_lifetime_ms": max_lifetime_ms}
        if any(v is not None for v in grant.values()):
            policy = policy.with_overrides(grant)
        return policy
    except TimingPolicyError as exc:
        raise ValidationFailed(f"lease timing: {exc}", param=exc.param) from None


def unreconciled_effects_exist(item: WorkItem, *, exclude_lease: Lease | None = None) -> bool:
    from leaseboard.core.models import Effect

    qs = Effect.objects.filter(
        work_item=item, decision="authorized", resolution="", outcome__in=["", "unknown"]
    )
    if exclude_lease is not None:
        qs = qs.exclude(lease=exclude_lease)
    return qs.exists()


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
    has asked the authority; this is the one place a lease is ended early."""
    if lease.state not in LIVE_STATES:
        raise RuntimeError(f"lease {lease.id} is already {lease.state}")
    if state == Lease.State.EXPIRED:
        leases_expire_locked([lease], now_ms)
        return lease
    lease.state = state
    lease.ended_at_ms = now_ms
    lease.end_reason = reason[:300]
    lease.ended_by_id = actor_id
    lease.save(update_fields=["state", "ended_at_ms", "end_reason", "ended_by"])
    LeaseEvent.objects.create(
        lease=lease,
        work_item_id=lease.work_item_id,
        epoch=lease.epoch,
        kind=state,
        at_ms=now_ms,
        actor_id=actor_id,
        detail={"reason": reason[:300], **(detail or {})},
    )
    return lease


def leases_expire_locked(leases: list[Lease], now_ms: int) -> list[int]:
    """Expire live leases the caller has locked, in a few statements for the whole batch:
    state, the EXPIRED event dated when validity ended, one expiry (or standing-lapsed)
    alert each, and the jeopardy alerts it supersedes. (The lock delay needs no write: an
    acquire derives it from the latest lease, so expiry never locks the work item row,
    which would invert the work item -> lease lock order.) The one expiry path
    for sweeps and for lazy expiry at acquire, renew or effect time. Returns the alert ids
    opened now."""
    if not leases:
        return []
    reason = "ttl elapsed"
    ids = [lease.id for lease in leases]
    Lease.objects.filter(id__in=ids).update(
        state=Lease.State.EXPIRED,
        ended_at_ms=Least(Value(now_ms), F("expires_at_ms")),
        end_reason=reason,
        ended_by=None,
    )
    events = []
    for lease in leases:
        lease.state = Lease.State.EXPIRED
        lease.ended_at_ms = min(now_ms, lease.expires_at_ms)
        lease.end_reason = reason
        lease.ended_by = None
        events.append(
            LeaseEvent(
                lease_id=lease.id,
                work_item_id=lease.work_item_id,
                epoch=lease.epoch,
                kind=LeaseEvent.Kind.EXPIRED,
                at_ms=lease.ended_at_ms,
                detail={"reason": reason, "materialized_at_ms": now_ms},
            )
        )
    LeaseEvent.objects.bulk_create(events)
    Alert.objects.filter(
        lease_id__in=ids, kind=Alert.Kind.JEOPARDY, resolved_at_ms__isnull=True
    ).update(resolved_at_ms=now_ms)
    return alerts_open([expiry_alert(lease, now_ms) for lease in leases])


def lease_expire_if_due_locked(lease: Lease, now_ms: int) -> bool:
    """Materialize an expiry that time has already decided. True if the lease ended now."""
    times = LeaseTimes(Certainty(lease.state), lease.jeopardy_at_ms, lease.expires_at_ms)
    if lease.state in LIVE_STATES and state_at(times, now_ms) is Certainty.EXPIRED:
        lease_end_locked(
            lease=lease, state=Lease.State.EXPIRED, now_ms=now_ms, reason="ttl elapsed"
        )
        return True
    return False


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
) -> Lease:
    """Raise the epoch and create the lease. The caller holds the work item's row lock and
    has ended any live lease; the partial unique constraint backs that up."""
    policy = timing_for(item, ttl_ms, max_lifetime_ms)
    jeopardy_after = (
        jeopardy_after_ms if jeopardy_after_ms is not None else policy.jeopardy_after_ms
    )
    lifetime = policy.max_lifetime_ms
    assert policy.renew_after_ms is not None and jeopardy_after is not None
    max_expires = now_ms + max(lifetime, policy.ttl_ms)
    expires = min(now_ms + policy.ttl_ms, max_expires)
    jeopardy_at = min(now_ms + jeopardy_after, expires)
    item.epoch += 1
    WorkItem.objects.filter(id=item.id).update(epoch=item.epoch)
    lease = Lease.objects.create(
        work_item=item,
        holder=holder,
        epoch=item.epoch,
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
        takeover_reason=takeover_reason[:1000],
    )
    LeaseEvent.objects.create(
        lease=lease,
        work_item=item,
        epoch=lease.epoch,
        kind=LeaseEvent.Kind.GRANTED,
        at_ms=now_ms,
        actor_id=actor_id or holder.id,
        detail={"grant_kind": grant_kind, "holder": holder.name, "ttl_ms": policy.ttl_ms},
    )
    return lease


def live_lease_locked(item: WorkItem) -> Lease | None:
    return (
        Lease.objects.select_for_update(no_key=True, of=("self",))
        .select_related("holder")
        .filter(work_item=item, state__in=LIVE_STATES)
        .first()
    )


@transaction.atomic(durable=True)
def lease_acquire(*, work_key: str, executor: Executor, ttl_ms: int | None = None) -> Grant:
    # Two round trips answer every gate question: lock the item, then, in a NEW statement
    # whose snapshot sees whatever committed while we waited for the lock, read the clock,
    # the live lease, the reconciliation gate and the latest checkpoint. (Subqueries in the
    # locking statement would use its pre-wait snapshot: the race test catches that.)
    from leaseboard.core.models import Effect

    authorize(Act.ACQUIRE, Actor.of_executor(executor))
    item = (
        WorkItem.objects.select_for_update(no_key=True, of=("self",))
        .select_related("queue")
        .filter(key=work_key)
        .first()
    )
    if item is None:
        raise NotFound(f"no work item {work_key!r}")
    gates = (
        WorkItem.objects.filter(pk=item.pk)
        .values_list(
            DbNowMs(),
            Subquery(
                Lease.objects.filter(work_item=OuterRef("pk"), state__in=LIVE_STATES).values("id")[
                    :1
                ]
            ),
            Exists(
                Effect.objects.filter(
                    work_item=OuterRef("pk"),
                    decision="authorized",
                    resolution="",
                    outcome__in=["", "unknown"],
                )
            ),
            Subquery(
                Checkpoint.objects.filter(work_item=OuterRef("pk"))
                .order_by("-seq")
                .values("id")[:1]
            ),
            # The lock delay: only when the latest grant ended by expiring.
            Subquery(
                Lease.objects.filter(work_item=OuterRef("pk"))
                .order_by("-epoch")
                .annotate(
                    until=Case(
                        When(
                            state=Lease.State.EXPIRED,
                            then=F("expires_at_ms") + F("lock_delay_ms"),
                        ),
                        default=Value(0),
                        output_field=BigIntegerField(),
                    )
                )
                .values("until")[:1]
            ),
        )
        .get()
    )
    now, live_lease_id, unreconciled, checkpoint_id, lock_delay_until = gates
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
        # waited for it): if it expired, its lock delay starts at its expiry.
        ended = live or Lease.objects.only("state", "expires_at_ms", "lock_delay_ms").get(
            id=live_lease_id
        )
        expired = ended.state == Lease.State.EXPIRED
        lock_delay_until = ended.expires_at_ms + ended.lock_delay_ms if expired else 0
    if lock_delay_until and lock_delay_until > now:
        raise LockDelay(
            "the previous holder's lease expired; grants resume after the lock delay",
            retry_after_ms=lock_delay_until - now,
        )
    if (
        executor.kind == Executor.Kind.AGENT
        and item.queue.agent_acquire_needs_reconciliation
        and unreconciled
    ):
        raise NeedsReconciliation(
            "effects attempted under an earlier lease have no known outcome; a human must "
            "reconcile them before an agent may take this work again"
        )
    lease = lease_grant_locked(item=item, holder=executor, now_ms=now, ttl_ms=ttl_ms)
    checkpoint = Checkpoint.objects.filter(id=checkpoint_id).first() if checkpoint_id else None
    token = fencing_token_issue(
        work_key=item.key,
        epoch=lease.epoch,
        lease_id=str(lease.id),
        holder=executor.name,
        now_ms=now,
        expires_at_ms=lease.max_expires_at_ms,
    )
    return Grant(lease=lease, fencing_token=token, checkpoint=checkpoint, now_ms=now)


def _renew_fast(pairs: list[tuple[uuid.UUID, int]], executor_id: int) -> dict[uuid.UUID, tuple]:
    params: list[Any] = []
    for lease_id, epoch in pairs:
        params.extend([Lease._meta.pk.get_db_prep_value(lease_id, connection), epoch])
    params.append(executor_id)
    with connection.cursor() as cursor:
        cursor.execute(sql.lease_renew(connection.vendor, len(pairs)), params)
        rows = cursor.fetchall()
    out = {}
    for raw_id, epoch, expires_in in rows:
        lease_id = raw_id if isinstance(raw_id, uuid.UUID) else uuid.UUID(str(raw_id))
        out[lease_id] = (int(epoch), int(expires_in))
    return out


@transaction.atomic(durable=True)
def _renew_slow(*, lease_id: uuid.UUID, executor: Executor, epoch: int) -> Renewal:
    """Explain a refused renew, or renew a lease the sweep had moved to jeopardy."""
    lease = (
        Lease.objects.select_for_update(no_key=True, of=("self",))
        .select_related("work_item", "holder")
        .filter(id=lease_id)
        .first()
    )
    if lease is None:
        raise NotFound(f"no lease {lease_id}")
    now = db_now_ms()
    authorize(
        Act.RENEW,
        Actor.agent(executor),
        now_ms=now,
        lease=lease,
        epoch=epoch,
        current_epoch=lease.work_item.epoch,
    )
    was_jeopardy = lease.state == Lease.State.JEOPARDY
    expires = min(now + lease.ttl_ms, lease.max_expires_at_ms)
    jeopardy_at = min(now + lease.jeopardy_after_ms, lease.max_expires_at_ms)
    gap = now - lease.renewed_at_ms
    recent = (lease.recent_renewals + f"{now:013d},")[-RENEWAL_WINDOW * RENEWAL_SLOT :]
    Lease.objects.filter(id=lease.id).update(
        state=Lease.State.ACTIVE,
        renewed_at_ms=now,
        expires_at_ms=expires,
        jeopardy_at_ms=jeopardy_at,
        due_at_ms=jeopardy_at,
        renew_count=lease.renew_count + 1,
        max_gap_ms=max(lease.max_gap_ms, gap),
        recent_renewals=recent,
    )
    if was_jeopardy:
        LeaseEvent.objects.create(
            lease=lease,
            work_item_id=lease.work_item_id,
            epoch=lease.epoch,
            kind=LeaseEvent.Kind.RECOVERED,
            at_ms=now,
            actor=executor,
            detail={"gap_ms": gap},
        )
        alerts_resolve(lease=lease, kind=Alert.Kind.JEOPARDY, now_ms=now)
    return Renewal(lease.id, lease.epoch, Certainty.ACTIVE.value, expires - now)


def lease_renew(*, lease_id: Any, executor: Executor, epoch: int) -> Renewal:
    """Renew as a compare-and-set on (lease, holder, epoch, live state)."""
    lid = parse_lease_id(lease_id)
    # A single autocommit statement is already atomic; no BEGIN/COMMIT round trips needed.
    hit = _renew_fast([(lid, epoch)], executor.id)
    if lid in hit:
        got_epoch, expires_in = hit[lid]
        return Renewal(lid, got_epoch, Certainty.ACTIVE.value, expires_in)
    return _renew_slow(lease_id=lid, executor=executor, epoch=epoch)


@dataclass(frozen=True)
class BatchResult:
    lease_id: str
    ok: bool
    code: str | None = None
    epoch: int | None = None
    expires_in_ms: int | None = None
    detail: str | None = None


def lease_renew_many(*, executor: Executor, items: list[tuple[Any, int]]) -> list[BatchResult]:
    """Renew many leases in one statement; refusals are explained per lease."""
    if len(items) > settings.LEASEBOARD_MAX_BATCH_RENEW:
        raise ValidationFailed(f"at most {settings.LEASEBOARD_MAX_BATCH_RENEW} leases per batch")
    parsed: list[tuple[str, uuid.UUID | None, int]] = []
    for raw, epoch in items:
        try:
            parsed.append((str(raw), parse_lease_id(raw), epoch))
        except NotFound:
            parsed.append((str(raw), None, epoch))
    unique: dict[uuid.UUID, int] = {}
    for _, lid, epoch in parsed:
        if lid is not None and lid not in unique:
            unique[lid] = epoch
    hits = _renew_fast(list(unique.items()), executor.id) if unique else {}
    results: list[BatchResult] = []
    for raw, lid, epoch in parsed:
        if lid is not None and lid in hits and hits[lid][0] == epoch:
            got_epoch, expires_in = hits[lid]
            results.append(BatchResult(raw, True, epoch=got_epoch, expires_in_ms=expires_in))
            continue
        if lid is None:
            results.append(BatchResult(raw, False, code="not_found", detail="not a lease id"))
            continue
        try:
            renewal = _renew_slow(lease_id=lid, executor=executor, epoch=epoch)
            hits[lid] = (renewal.epoch, renewal.expires_in_ms)
            results.append(
                BatchResult(raw, True, epoch=renewal.epoch, expires_in_ms=renewal.expires_in_ms)
            )
        except LeaseboardError as exc:
            results.append(BatchResult(raw, False, code=exc.code, detail=exc.detail))
    return results


def held_lease_locked(
    *, act: Act, lease_id: Any, executor: Executor, epoch: int
) -> tuple[Lease, int]:
    """Lock a lease the caller claims to hold at `epoch`, ask the authority whether `act`
    may happen under it now, and return it with the database clock read after the lock."""
    lid = parse_lease_id(lease_id)
    lease = (
        Lease.objects.select_for_update(no_key=True, of=("self",))
        .select_related("work_item", "work_item__queue", "holder")
        .filter(id=lid)
        .first()
    )
    if lease is None:
        raise NotFound(f"no lease {lid}")
    now_ms = db_now_ms()
    authorize(
        act,
        Actor.of_executor(executor),
        now_ms=now_ms,
        lease=lease,
        epoch=epoch,
        current_epoch=lease.work_item.epoch,
    )
    return lease, now_ms


@transaction.atomic(durable=True)
def lease_release(*, lease_id: Any, executor: Executor, epoch: int) -> Lease:
    """Idempotent compare-and-set: releases exactly this lease at this epoch, never a newer
    grant. Releasing an already-released lease answers as a success."""
    lid = parse_lease_id(lease_id)
    lease = (
        Lease.objects.select_for_update(no_key=True, of=("self",))
        .select_related("holder", "work_item")
        .filter(id=lid)
        .first()
    )
    if lease is None:
        raise NotFound(f"no lease {lid}")
    now = db_now_ms()
    authorize(
        Act.RELEASE,
        Actor.agent(executor),
        now_ms=now,
        lease=lease,
        epoch=epoch,
        current_epoch=lease.work_item.epoch,
    )
    if lease.state == Lease.State.RELEASED:
        return lease  # a retried release
    return lease_end_locked(
        lease=lease,
        state=Lease.State.RELEASED,
        now_ms=now,
        reason="released by holder",
        actor_id=executor.id,
    )


@transaction.atomic(durable=True)
def lease_checkpoint(*, lease_id: Any, executor: Executor, epoch: int, data: Any) -> Checkpoint:
    size = json_size_checked(data, param="data", limit=settings.LEASEBOARD_MAX_CHECKPOINT_BYTES)
    lease, now = held_lease_locked(
        act=Act.CHECKPOINT, lease_id=lease_id, executor=executor, epoch=epoch
    )
    last = Checkpoint.objects.filter(work_item_id=lease.work_item_id).order_by("-seq").first()
    return Checkpoint.objects.create(
        work_item_id=lease.work_item_id,
        lease=lease,
        epoch=lease.epoch,
        seq=(last.seq + 1) if last else 1,
        data=data,
        size_bytes=size,
        at_ms=now,
    )


def executor_id_of(actor: Actor) -> int:
    """The executor row an actor writes history as; a human's is created on first need,
    only once an act has been allowed."""
    if actor.executor_id is not None:
        return actor.executor_id
    from leaseboard.core.services.executors import human_executor_for_user_id

    return human_executor_for_user_id(actor.user_id).id


def lease_revoke_locked(*, lease: Lease, actor: Actor, now_ms: int, reason: str) -> Lease:
    """Revoke a live lease inside a caller's transaction (takeover approval, operator
    revoke). Old-epoch effects are refused from the moment the caller commits."""
    if not reason.strip():
        raise ValidationFailed("a revocation needs a reason", param="reason")
    authorize(Act.REVOKE, actor, now_ms=now_ms, lease=lease)
    lease_end_locked(
        lease=lease,
        state=Lease.State.REVOKED,
        now_ms=now_ms,
        reason=reason,
        actor_id=executor_id_of(actor),
    )
    alerts_resolve(lease=lease, now_ms=now_ms)
    return lease


def lease_extend_locked(
    *,
    lease: Lease,
    actor: Actor,
    epoch: int,
    current_epoch: int,
    now_ms: int,
    extend_ms: int,
    reason: str,
) -> Lease:
    """Human standing: a new absolute expiry `now + extend_ms`, within the lease's lifetime
    cap. Same epoch; recorded as an EXTENDED event."""
    authorize(
        Act.EXTEND_STANDING,
        actor,
        now_ms=now_ms,
        lease=lease,
        epoch=epoch,
        current_epoch=current_epoch,
    )
    new_expiry = min(now_ms + extend_ms, lease.max_expires_at_ms)
    if new_expiry <= lease.expires_at_ms:
        raise ValidationFailed(
            "the standing is already at its maximum; hand back, assign or complete",
            param="extend_ms",
        )
    # Compare-and-set on the epoch, under the row lock the caller holds.
    Lease.objects.filter(id=lease.id, epoch=lease.epoch).update(
        expires_at_ms=new_expiry, jeopardy_at_ms=new_expiry, due_at_ms=new_expiry
    )
    lease.expires_at_ms = lease.jeopardy_at_ms = lease.due_at_ms = new_expiry
    LeaseEvent.objects.create(
        lease=lease,
        work_item_id=lease.work_item_id,
        epoch=lease.epoch,
        kind=LeaseEvent.Kind.EXTENDED,
        at_ms=now_ms,
        actor_id=executor_id_of(actor),
        detail={"reason": reason[:300], "expires_at_ms": new_expiry},
    )
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


def lease_assign_locked(
    *, item: WorkItem, lease: Lease, actor: Actor, epoch: int, agent: Executor, now_ms: int
) -> Lease:
    """End human standing and grant the named agent a lease at a new epoch (the caller
    holds the work item's lock)."""
    authorize(Act.ASSIGN, actor, now_ms=now_ms, lease=lease, epoch=epoch, current_epoch=item.epoch)
    by = executor_id_of(actor)
    lease_end_locked(
        lease=lease,
        state=Lease.State.RELEASED,
        now_ms=now_ms,
        reason=f"assigned to {agent.name}",
        actor_id=by,
    )
    return lease_grant_locked(
        item=item, holder=agent, now_ms=now_ms, grant_kind=Lease.GrantKind.ASSIGN, actor_id=by
    )


@transaction.atomic(durable=True)
def lease_revoke(*, lease_id: Any, actor: Actor, reason: str, request_id: str = "") -> Lease:
    """A supervisor revokes a live lease with a reason; the work item returns to the pool
    and the holder's next renew answers `lease_revoked` with that reason."""
    reason = (reason or "").strip()
    if not reason or len(reason) > 1000:
        raise ValidationFailed(
            "a revocation needs a reason of 1 to 1000 characters", param="reason"
        )
    lid = parse_lease_id(lease_id)
    item = work_item_locked(Lease, lid, what="lease")
    lease = (
        Lease.objects.select_for_update(no_key=True, of=("self",))
        .select_related("holder")
        .get(id=lid)
    )
    now = db_now_ms()
    before = {"state": lease.state, "epoch": lease.epoch, "holder": lease.holder.name}
    lease_revoke_locked(lease=lease, actor=actor, now_ms=now, reason=reason)
    audit_act(
        act=Act.REVOKE,
        actor=actor,
        action="lease.revoke",
        object_type="lease",
        object_id=str(lease.id),
        work_item=item,
        at_ms=now,
        reason=reason,
        before=before,
        after={"state": lease.state, "epoch": item.epoch},
        request_id=request_id,
    )
    return lease
