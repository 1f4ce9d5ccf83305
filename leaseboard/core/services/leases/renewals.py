"""Renewal as a compare-and-set that sets an absolute expiry from the database clock:
one statement for one lease or a thousand; the slow path explains a refusal or brings a
lease back from jeopardy."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from leaseboard.core import sql
from leaseboard.core.authority import Actor, authorize
from leaseboard.core.clock import db_now_ms
from leaseboard.core.locking import WORK_AND_HOLDER, leases_locked
from leaseboard.core.models import Alert, Executor, Lease, LeaseEvent
from leaseboard.core.models.leases import RENEWAL_SLOT, RENEWAL_WINDOW
from leaseboard.core.services.leases.base import lease_events_insert, parse_lease_id
from leaseboard.core.tracing import Decision, decided
from leaseboard.domain.authority import Act
from leaseboard.domain.certainty import Certainty
from leaseboard.domain.errors import (
    LeaseboardError,
    NotFound,
    ValidationFailed,
)


@dataclass(frozen=True)
class Renewal:
    lease_id: uuid.UUID
    epoch: int
    certainty: str
    expires_in_ms: int
    hold_reason: str = ""  # an operator's hold: renewals go on, new effects are refused


def _renew_fast(
    pairs: list[tuple[uuid.UUID, int]], executor_id: int
) -> dict[uuid.UUID, tuple[int, int, str]]:
    prep = Lease._meta.pk.get_db_prep_value
    rows = [[prep(lease_id, connection), epoch] for lease_id, epoch in pairs]
    params = [*sql.rows_params(connection.vendor, rows), executor_id]
    # Prepared: the single renew's statement is one text whatever the lease; a batch's
    # text depends only on its size.
    with sql.prepared_cursor(connection) as cursor:
        cursor.execute(sql.lease_renew(connection.vendor, len(pairs)), params)
        rows = cursor.fetchall()
    out: dict[uuid.UUID, tuple[int, int, str]] = {}
    for raw_id, epoch, expires_in, hold_reason in rows:
        lease_id = raw_id if isinstance(raw_id, uuid.UUID) else uuid.UUID(str(raw_id))
        out[lease_id] = (int(epoch), int(expires_in), hold_reason or "")
    return out


def _renew_slow(*, lease_id: uuid.UUID, executor: Executor, epoch: int) -> Renewal:
    """Explain a refused renew, or renew a lease the sweep had moved to jeopardy."""
    outcome = _renew_locked([(lease_id, epoch)], executor)[lease_id, epoch]
    if isinstance(outcome, LeaseboardError):
        raise outcome
    return outcome


Outcome = Renewal | LeaseboardError


def _refusal_or_none(
    lease: Lease | None, lease_id: uuid.UUID, epoch: int, actor: Actor, now_ms: int
) -> LeaseboardError | None:
    """The authority's refusal of this renew (NotFound for no lease), or None: allowed."""
    if lease is None:
        return NotFound(f"no lease {lease_id}")
    try:
        authorize(
            Act.RENEW,
            actor,
            now_ms=now_ms,
            lease=lease,
            epoch=epoch,
            current_epoch=lease.work_item.epoch,
        )
    except LeaseboardError as exc:
        return exc
    return None


def _renew_misses(
    pairs: list[tuple[uuid.UUID, int]], executor: Executor
) -> dict[tuple[uuid.UUID, int], Outcome]:
    """The batch entries the fast path did not renew, explained together: one read of
    their leases (no lock) answers every refusal, and only the leases the authority allows
    (a sweep moved them to jeopardy) are locked and renewed, in one transaction. A refusal
    read without the lock is the one the lock would give: what refuses a renew (an ended
    lease, another holder, a later epoch, a passed expiry) never reverts. A fleet whose
    renewals fell behind sends thousands of expired leases in one batch; one transaction
    each (2,500 of them in a 100,000-agent soak) outlasted the request's deadline."""
    leases = Lease.objects.select_related(*WORK_AND_HOLDER).in_bulk({lid for lid, _ in pairs})
    now, actor = db_now_ms(), Actor.of_executor(executor)
    out: dict[tuple[uuid.UUID, int], Outcome] = {}
    allowed: list[tuple[uuid.UUID, int]] = []
    for lid, epoch in pairs:
        refused = _refusal_or_none(leases.get(lid), lid, epoch, actor, now)
        if refused is None:
            allowed.append((lid, epoch))
        else:
            out[lid, epoch] = refused
    if allowed:
        out.update(_renew_locked(allowed, executor))
    return out


@transaction.atomic(durable=True)
def _renew_locked(
    pairs: list[tuple[uuid.UUID, int]], executor: Executor
) -> dict[tuple[uuid.UUID, int], Outcome]:
    """Under the leases' row locks (taken in id order, one statement), ask the authority
    again and renew what it allows: back from jeopardy with a RECOVERED event and its
    jeopardy alert resolved. Each (lease, epoch) gets its renewal or its refusal."""
    leases = leases_locked([lid for lid, _ in pairs], related=WORK_AND_HOLDER)
    now, actor = db_now_ms(), Actor.of_executor(executor)
    out: dict[tuple[uuid.UUID, int], Outcome] = {}
    events: list[LeaseEvent] = []
    recovered: list[uuid.UUID] = []
    for lid, epoch in pairs:
        lease = leases.get(lid)
        refused = _refusal_or_none(lease, lid, epoch, actor, now)
        if refused is not None or lease is None:
            out[lid, epoch] = refused or NotFound(f"no lease {lid}")
            continue
        was_jeopardy = lease.state == Lease.State.JEOPARDY
        gap = now - lease.renewed_at_ms
        lease.state = Lease.State.ACTIVE
        lease.renewed_at_ms = now
        lease.expires_at_ms = min(now + lease.ttl_ms, lease.max_expires_at_ms)
        lease.jeopardy_at_ms = lease.due_at_ms = min(
            now + lease.jeopardy_after_ms, lease.max_expires_at_ms
        )
        lease.renew_count += 1
        lease.max_gap_ms = max(lease.max_gap_ms, gap)
        lease.recent_renewals = (lease.recent_renewals + f"{now:013d},")[
            -RENEWAL_WINDOW * RENEWAL_SLOT :
        ]
        Lease.objects.filter(id=lid).update(**{f: getattr(lease, f) for f in _RENEWED_FIELDS})
        if was_jeopardy:
            recovered.append(lid)
            events.append(
                LeaseEvent(
                    lease_id=lid,
                    work_item_id=lease.work_item_id,
                    epoch=lease.epoch,
                    kind=LeaseEvent.Kind.RECOVERED,
                    at_ms=now,
                    actor_id=executor.id,
                    detail={"gap_ms": gap},
                )
            )
        out[lid, epoch] = Renewal(
            lid, lease.epoch, Certainty.ACTIVE.value, lease.expires_at_ms - now, lease.hold_reason
        )
    lease_events_insert(events)
    if recovered:
        Alert.objects.filter(
            resolved_at_ms__isnull=True, lease_id__in=recovered, kind=Alert.Kind.JEOPARDY
        ).update(resolved_at_ms=now)
    return out


_RENEWED_FIELDS = (
    "state",
    "renewed_at_ms",
    "expires_at_ms",
    "jeopardy_at_ms",
    "due_at_ms",
    "renew_count",
    "max_gap_ms",
    "recent_renewals",
)


def _renewed(span: Decision, renewal: Renewal) -> None:
    span.note(decision="renewed", epoch=renewal.epoch, on_hold=bool(renewal.hold_reason) or None)


@decided(
    "leaseboard.lease.renew",
    about=lambda kw: {"lease_id": str(kw["lease_id"]), "epoch": kw["epoch"]},
    result=_renewed,
)
def lease_renew(*, lease_id: Any, executor: Executor, epoch: int) -> Renewal:
    """Renew as a compare-and-set on (lease, holder, epoch, live state)."""
    lid = parse_lease_id(lease_id)
    # A single autocommit statement is already atomic; no BEGIN/COMMIT round trips needed.
    hit = _renew_fast([(lid, epoch)], executor.id)
    if lid in hit:
        got_epoch, expires_in, hold_reason = hit[lid]
        return Renewal(lid, got_epoch, Certainty.ACTIVE.value, expires_in, hold_reason)
    return _renew_slow(lease_id=lid, executor=executor, epoch=epoch)


# deliberate: declared fields; api/schemas/leases.py BatchResultOut is its wire form.
@dataclass(frozen=True)
class BatchResult:
    lease_id: str
    ok: bool
    code: str | None = None
    epoch: int | None = None
    expires_in_ms: int | None = None
    detail: str | None = None
    on_hold: bool = False
    hold_reason: str | None = None


def _renewed_many(span: Decision, results: list[BatchResult]) -> None:
    refused = [r.code for r in results if not r.ok]
    span.note(
        decision="renewed" if not refused else "partly_refused",
        lease_count=len(results),
        refused_count=len(refused),
        code=",".join(sorted({c for c in refused if c})) or None,
    )


@decided(
    "leaseboard.lease.renew_batch",
    about=lambda kw: {"lease_count": len(kw["items"])},
    result=_renewed_many,
)
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
    # Each missed (lease, epoch) is explained once, all of them together (_renew_misses):
    # a thousand copies of one entry, or a thousand expired leases, cost one read.
    misses = sorted(
        {
            (lid, epoch)
            for _, lid, epoch in parsed
            if lid is not None and not (lid in hits and hits[lid][0] == epoch)
        },
        key=lambda pair: (str(pair[0]), pair[1]),
    )
    explained = _renew_misses(misses, executor) if misses else {}
    results: list[BatchResult] = []
    for raw, lid, epoch in parsed:
        if lid is None:
            results.append(BatchResult(raw, False, code="not_found", detail="not a lease id"))
            continue
        outcome = explained.get((lid, epoch))
        if outcome is None:
            got_epoch, expires_in, hold = hits[lid]
            outcome = Renewal(lid, got_epoch, Certainty.ACTIVE.value, expires_in, hold)
        if isinstance(outcome, LeaseboardError):
            results.append(BatchResult(raw, False, code=outcome.code, detail=outcome.detail))
            continue
        results.append(
            BatchResult(
                raw,
                True,
                epoch=outcome.epoch,
                expires_in_ms=outcome.expires_in_ms,
                on_hold=bool(outcome.hold_reason),
                hold_reason=outcome.hold_reason or None,
            )
        )
    return results
