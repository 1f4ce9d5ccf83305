"""What a supervisor does to agents directly: revoke many leases with one reason, and
quarantine an agent (its credential deactivated and every live lease revoked, in one
audited transaction) until an approver lifts it.

Each lease is revoked through the one operator revoke (leases.lease_revoke_audited_locked),
so a revoke in bulk or by quarantine is the same act, decided by the same rule, recorded
the same way. A quarantined agent's requests are refused as `unauthenticated` from the
commit on in this process (its cached token is forgotten) and within
LEASEBOARD_TOKEN_CACHE_SECONDS (default 2 s) in every other one; a grant to it is refused
at once everywhere (core.sql.executor_active_shared).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from django.db import IntegrityError, OperationalError, transaction

from leaseboard.core.authority import Actor, agent_queues_of, authorize, authorize_who
from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import BulkRevoke, Executor, Lease, Quarantine
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.core.services.audit import audit_act
from leaseboard.core.services.executors import token_cache_forget
from leaseboard.core.services.leases import (
    lease_expire_if_due_locked,
    lease_for_revoke_locked,
    lease_id_or_none,
    lease_revoke_audited_locked,
    leases_in_work_item_order,
    revoke_reason,
)
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import (
    IdempotencyConflict,
    LeaseboardError,
    NotFound,
    ValidationFailed,
)
from leaseboard.domain.vocabulary import reason_checked

BULK_REVOKE_MAX = 200
NOTE_MAX = 1000
DEADLOCK = "40P01"  # PostgreSQL's SQLSTATE for a detected deadlock


@dataclass(frozen=True)
class RevokeOutcome:
    lease_id: str
    ok: bool
    work_key: str = ""
    holder: str = ""
    epoch: int | None = None
    code: str | None = None
    detail: str = ""


def _lease_ids(raw: list[Any]) -> list[str]:
    """The asked lease ids, each once, in order and canonical form; malformed ones kept (to
    be answered not_found)."""
    texts = (str(x).strip() for x in raw if x and str(x).strip())
    return list(dict.fromkeys(str(lease_id_or_none(t) or t) for t in texts))


def _revoke_one(
    raw_id: str,
    known: Lease | None,
    *,
    actor: Actor,
    reason_category: str,
    reason_text: str,
    request_id: str,
    detail: dict[str, Any],
) -> RevokeOutcome:
    """Revoke one lease in a savepoint: its refusal undoes only its own writes. `known` is
    the lease as read before any lock, to name it in the outcome."""
    named: dict[str, Any] = {
        "work_key": known.work_item.key if known else "",
        "holder": known.holder.name if known else "",
        "epoch": known.epoch if known else None,
    }
    try:
        with transaction.atomic():
            item, lease = lease_for_revoke_locked(raw_id)
            # deliberate: the one operator revoke, called with its keywords by name (as below).
            lease_revoke_audited_locked(
                item=item,
                lease=lease,
                actor=actor,
                reason_category=reason_category,
                reason_text=reason_text,
                request_id=request_id,
                detail=detail,
            )
    except LeaseboardError as exc:
        return RevokeOutcome(raw_id, False, **named, code=exc.code, detail=exc.detail)
    return RevokeOutcome(raw_id, True, **named)


def _revoked_in_item_order(
    ids: list[str],
    *,
    actor: Actor,
    reason_category: str,
    reason_text: str,
    request_id: str,
    detail: dict[str, Any],
) -> dict[str, RevokeOutcome]:
    """Revoke each asked lease, locking in work item order whatever order the leases were
    asked in: two bulks over the same items never wait for each other in a circle."""
    known, order = leases_in_work_item_order(ids)
    return {
        raw: _revoke_one(
            raw,
            known.get(raw),
            actor=actor,
            reason_category=reason_category,
            reason_text=reason_text,
            request_id=request_id,
            detail=detail,
        )
        for raw in order
    }


@transaction.atomic(durable=True)
def leases_revoke_bulk(
    *,
    lease_ids: list[Any],
    actor: Actor,
    reason_category: str,
    reason_text: str,
    idempotency_key: str,
    request_id: str = "",
) -> BulkRevoke:
    """Revoke several leases with one structured reason, each by the operator revoke, with
    an outcome per lease (one refused lease does not stop the others). A repeated
    idempotency key answers with the first bulk's outcomes; with a different ask it is an
    `idempotency_conflict`."""
    authorize_who(Act.REVOKE, actor)
    key = (idempotency_key or "").strip()
    if not key or len(key) > 200:
        raise ValidationFailed(
            "an idempotency key of 1 to 200 characters is required", param="idempotency_key"
        )
    text = reason_checked(reason_category, reason_text, what="a revocation")
    ids = _lease_ids(lease_ids)
    first = BulkRevoke.objects.filter(requested_by_id=actor.user_id, idempotency_key=key).first()
    if first is not None:
        return _replayed(first, ids, reason_category, text)
    if not ids:
        raise ValidationFailed("select at least one lease", param="lease_ids")
    if len(ids) > BULK_REVOKE_MAX:
        raise ValidationFailed(f"at most {BULK_REVOKE_MAX} leases per bulk revoke")
    bulk = BulkRevoke(
        requested_by_id=actor.user_id,  # type: ignore[misc]  # a human: authorized above
        idempotency_key=key,
        reason_category=reason_category,
        reason_text=text,
        lease_ids=ids,
        created_at_ms=db_now_ms(),
    )
    try:
        with transaction.atomic():
            bulk.save(force_insert=True)
    except IntegrityError:
        # A concurrent retry with the same key committed first.
        first = BulkRevoke.objects.get(requested_by_id=actor.user_id, idempotency_key=key)
        return _replayed(first, ids, reason_category, text)
    outcomes = _revoked_in_item_order(
        ids,
        actor=actor,
        reason_category=reason_category,
        reason_text=text,
        request_id=request_id,
        detail={"bulk_revoke": bulk.id},
    )
    bulk.results = [asdict(outcomes[raw]) for raw in ids]
    bulk.save(update_fields=["results"])
    return bulk


def _replayed(first: BulkRevoke, ids: list[str], category: str, text: str) -> BulkRevoke:
    if first.lease_ids != ids or (first.reason_category, first.reason_text) != (category, text):
        raise IdempotencyConflict("this idempotency key was used for a different bulk revoke")
    return first


# -- quarantine -----------------------------------------------------------------------------


@dataclass
class QuarantineResult:
    quarantine: Quarantine
    changed: bool  # False: the agent was quarantined already (a retried click)
    revoked: list[RevokeOutcome] = field(default_factory=list)


def _agent_locked(executor_id: int) -> Executor:
    # FOR NO KEY UPDATE: conflicts with the share lock a grant takes on its holder's row.
    executor = Executor.objects.select_for_update(no_key=True).filter(id=executor_id).first()
    if executor is None:
        raise NotFound(f"no executor {executor_id}")
    if executor.kind != Executor.Kind.AGENT:
        raise ValidationFailed("only agents are quarantined; people lose their roles instead")
    return executor


def agent_quarantine(
    *,
    executor_id: int,
    actor: Actor,
    reason_category: str,
    reason_text: str,
    request_id: str = "",
) -> QuarantineResult:
    """Quarantine an agent: deactivate its credential and revoke every live lease it holds,
    in one transaction, with one reason and one audit entry (plus one per revoked lease,
    as for any revoke). Tried up to three times if PostgreSQL breaks a deadlock against a
    grant to the same agent (the agent re-acquiring its own expired lease at that moment)."""
    for attempt in range(3):
        try:
            return _quarantine_once(
                executor_id=executor_id,
                actor=actor,
                reason_category=reason_category,
                reason_text=reason_text,
                request_id=request_id,
            )
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != DEADLOCK or attempt == 2:
                raise
    raise AssertionError("unreachable")


def _live_revoked(
    executor: Executor,
    quarantine: Quarantine,
    *,
    actor: Actor,
    reason_category: str,
    reason_text: str,
    request_id: str,
) -> tuple[int, list[RevokeOutcome]]:
    """Revoke every live lease the quarantined agent holds, in work item order; how many
    were live, and the outcomes of those still live under their lock."""
    live = list(
        Lease.objects.filter(holder=executor, state__in=LIVE_STATES)
        .order_by("work_item_id")
        .values_list("id", flat=True)
    )
    reason = f"agent quarantined: {revoke_reason(reason_category, reason_text)}"
    revoked: list[RevokeOutcome] = []
    for lease_id in live:
        item, lease = lease_for_revoke_locked(lease_id)
        if lease.state not in LIVE_STATES or lease_expire_if_due_locked(lease, db_now_ms()):
            continue  # ended meanwhile, or by time: nothing left to revoke
        # deliberate: the one operator revoke, called with its keywords by name (as above).
        lease_revoke_audited_locked(
            item=item,
            lease=lease,
            actor=actor,
            reason_category=reason_category,
            reason_text=reason_text,
            request_id=request_id,
            reason=reason,
            detail={"quarantine": quarantine.id},
        )
        revoked.append(RevokeOutcome(str(lease.id), True, item.key, executor.name, lease.epoch))
    return len(live), revoked


@transaction.atomic(durable=True)
def _quarantine_once(
    *, executor_id: int, actor: Actor, reason_category: str, reason_text: str, request_id: str
) -> QuarantineResult:
    authorize_who(Act.QUARANTINE, actor)
    text = reason_checked(reason_category, reason_text, what="a quarantine")
    # The agent's row first: from this lock on no grant to it can pass its share lock, and
    # grants already past it have committed, so the list below has every live lease.
    executor = _agent_locked(executor_id)
    # An agent works in its queues: a person scoped to some queues quarantines only an
    # agent confined to them.
    authorize(Act.QUARANTINE, actor, agent_queues=agent_queues_of(executor))
    current = Quarantine.objects.filter(executor=executor, lifted_at_ms__isnull=True).first()
    if current is not None:
        return QuarantineResult(current, changed=False)
    Executor.objects.filter(id=executor.id).update(is_active=False)
    now = db_now_ms()
    quarantine = Quarantine.objects.create(
        executor=executor,
        reason_category=reason_category,
        reason_text=text,
        started_at_ms=now,
        started_by_id=actor.user_id,  # type: ignore[misc]  # a human: authorized above
    )
    live, revoked = _live_revoked(
        executor,
        quarantine,
        actor=actor,
        reason_category=reason_category,
        reason_text=text,
        request_id=request_id,
    )
    quarantine.revoked_leases = [
        {"lease_id": r.lease_id, "work_key": r.work_key, "epoch": r.epoch} for r in revoked
    ]
    quarantine.save(update_fields=["revoked_leases"])
    # deliberate: audit_act's keywords one a line; each act records its own before and after.
    audit_act(
        act=Act.QUARANTINE,
        actor=actor,
        action="agent.quarantine",
        object_type="executor",
        object_id=str(executor.id),
        at_ms=now,
        reason=revoke_reason(reason_category, text),
        before={"name": executor.name, "is_active": executor.is_active, "live_leases": live},
        after={
            "name": executor.name,
            "is_active": False,
            "quarantine": quarantine.id,
            "revoked": quarantine.revoked_leases,
        },
        request_id=request_id,
    )
    # This process forgets the tokens it has verified; others within their cache ttl.
    transaction.on_commit(token_cache_forget)
    return QuarantineResult(quarantine, changed=True, revoked=revoked)


@transaction.atomic(durable=True)
def agent_quarantine_lift(
    *, executor_id: int, actor: Actor, note: str, request_id: str = ""
) -> Quarantine:
    """Lift an agent's quarantine: its credential works again. Its revoked leases stay
    revoked; it acquires work again like any agent, at new epochs."""
    authorize_who(Act.LIFT_QUARANTINE, actor)
    note = (note or "").strip()
    if not note or len(note) > NOTE_MAX:
        raise ValidationFailed(f"say why, in 1 to {NOTE_MAX} characters", param="note")
    executor = _agent_locked(executor_id)
    authorize(Act.LIFT_QUARANTINE, actor, agent_queues=agent_queues_of(executor))
    quarantine = (
        Quarantine.objects.select_for_update(no_key=True)
        .filter(executor=executor, lifted_at_ms__isnull=True)
        .first()
    )
    if quarantine is None:
        raise ValidationFailed(f"{executor.name} is not quarantined")
    now = db_now_ms()
    quarantine.lifted_at_ms = now
    quarantine.lifted_by_id = actor.user_id
    quarantine.lift_note = note
    quarantine.save(update_fields=["lifted_at_ms", "lifted_by", "lift_note"])
    Executor.objects.filter(id=executor.id).update(is_active=True)
    # deliberate: audit_act's keywords one a line; each act records its own before and after.
    audit_act(
        act=Act.LIFT_QUARANTINE,
        actor=actor,
        action="agent.quarantine_lift",
        object_type="executor",
        object_id=str(executor.id),
        at_ms=now,
        reason=note,
        before={"name": executor.name, "is_active": False, "quarantine": quarantine.id},
        after={"name": executor.name, "is_active": True},
        request_id=request_id,
    )
    return quarantine
