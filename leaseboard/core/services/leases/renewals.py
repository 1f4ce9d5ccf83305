"""Renewal as a compare-and-set that sets an absolute expiry from the database clock:
one statement for one lease or a thousand; the slow path explains a refusal or brings a
lease back from jeopardy."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from leaseboard.core import sql
from leaseboard.core.locking import WORK_AND_HOLDER
from leaseboard.core.models import Alert, Executor, Lease, LeaseEvent
from leaseboard.core.models.leases import RENEWAL_SLOT, RENEWAL_WINDOW
from leaseboard.core.services.alerts import alerts_resolve
from leaseboard.core.services.leases.base import lease_event_record, parse_lease_id
from leaseboard.core.services.leases.holding import held_lease_locked
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


@transaction.atomic(durable=True)
def _renew_slow(*, lease_id: uuid.UUID, executor: Executor, epoch: int) -> Renewal:
    """Explain a refused renew, or renew a lease the sweep had moved to jeopardy."""
    lease, now = held_lease_locked(
        act=Act.RENEW, lease_id=lease_id, executor=executor, epoch=epoch, related=WORK_AND_HOLDER
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
        lease_event_record(
            lease,
            LeaseEvent.Kind.RECOVERED,
            at_ms=now,
            actor_id=executor.id,
            detail={"gap_ms": gap},
        )
        alerts_resolve(lease=lease, kind=Alert.Kind.JEOPARDY, now_ms=now)
    return Renewal(lease.id, lease.epoch, Certainty.ACTIVE.value, expires - now, lease.hold_reason)


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
    # A batch may name one lease many times: each (lease, epoch) is explained once, so a
    # thousand copies cost one locking transaction, not a thousand.
    explained: dict[tuple[uuid.UUID, int], BatchResult] = {}
    results: list[BatchResult] = []
    for raw, lid, epoch in parsed:
        if lid is not None and lid in hits and hits[lid][0] == epoch:
            got_epoch, expires_in, hold = hits[lid]
            results.append(
                BatchResult(
                    raw,
                    True,
                    epoch=got_epoch,
                    expires_in_ms=expires_in,
                    on_hold=bool(hold),
                    hold_reason=hold or None,
                )
            )
            continue
        if lid is None:
            results.append(BatchResult(raw, False, code="not_found", detail="not a lease id"))
            continue
        if (lid, epoch) in explained:
            results.append(replace(explained[lid, epoch], lease_id=raw))
            continue
        try:
            renewal = _renew_slow(lease_id=lid, executor=executor, epoch=epoch)
            hits[lid] = (renewal.epoch, renewal.expires_in_ms, renewal.hold_reason)
            result = BatchResult(
                raw,
                True,
                epoch=renewal.epoch,
                expires_in_ms=renewal.expires_in_ms,
                on_hold=bool(renewal.hold_reason),
                hold_reason=renewal.hold_reason or None,
            )
        except LeaseboardError as exc:
            result = BatchResult(raw, False, code=exc.code, detail=exc.detail)
        explained[lid, epoch] = result
        results.append(result)
    return results
