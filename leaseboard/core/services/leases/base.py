"""What every lease service shares: lease ids from the wire, the timing a grant gets,
the reconciliation gate's question, the fence between holders (in Python and in SQL, side
by side), the executor row an actor writes history as, and the lease's history itself."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import (
    BigIntegerField,
    Case,
    Exists,
    Expression,
    F,
    Max,
    OuterRef,
    Q,
    Value,
    When,
)
from django.db.models.functions import Coalesce, Greatest

from leaseboard.core import sql
from leaseboard.core.authority import Actor
from leaseboard.core.models import Effect, Lease, LeaseEvent, WorkItem
from leaseboard.domain.errors import (
    NotFound,
    ValidationFailed,
)
from leaseboard.domain.timing import (
    TimingPolicy,
    TimingPolicyError,
    fence_after_early_end,
    next_grant_at_ms,
)


def parse_lease_id(raw: Any) -> uuid.UUID:
    try:
        return raw if isinstance(raw, uuid.UUID) else uuid.UUID(str(raw))
    except (ValueError, AttributeError, TypeError):
        raise NotFound(f"no lease {str(raw)[:60]!r}") from None


def lease_id_or_none(raw: Any) -> uuid.UUID | None:
    """`raw` as a lease id, or None where it cannot be one (a bulk answers it not_found)."""
    try:
        return parse_lease_id(raw)
    except NotFound:
        return None


def leases_in_work_item_order(ids: list[str]) -> tuple[dict[str, Lease], list[str]]:
    """For an act on many leases: the asked leases as read before any lock (by id, with
    their work item and holder, to name each in its outcome), and the ids in the order to
    lock them in, by work item whatever order they were asked in (ids of no lease first), so
    two bulks over the same items never wait for each other in a circle."""
    known = {
        str(lease.id): lease
        for lease in Lease.objects.filter(id__in=[u for u in map(lease_id_or_none, ids) if u])
        .select_related("work_item", "holder")
        .defer("work_item__scope", "recent_renewals")
    }
    order = sorted(ids, key=lambda raw: (known[raw].work_item_id if raw in known else 0, raw))
    return known, order


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


# An effect whose outcome nobody knows yet: no outcome, or `unknown` (a timed-out request
# may still arrive), and not reconciled. The reconciliation gate and the fence both ask it.
OPEN_EFFECT = Q(decision="authorized", resolution="", outcome__in=["", "unknown"])


def unreconciled_effects_exist(item: WorkItem, *, exclude_lease: Lease | None = None) -> bool:
    qs = Effect.objects.filter(OPEN_EFFECT, work_item=item)
    if exclude_lease is not None:
        qs = qs.exclude(lease=exclude_lease)
    return qs.exists()


def executor_id_of(actor: Actor) -> int:
    """The executor row an actor writes history as; a human's is created on first need,
    only once an act has been allowed."""
    if actor.executor_id is not None:
        return actor.executor_id
    from leaseboard.core.services.executors import human_executor_for_user_id

    return human_executor_for_user_id(actor.user_id).id


# -- the fence between holders (docs/design.md §5) -------------------------------------


def skew_ms() -> int:
    return settings.LEASEBOARD_FENCING_SKEW_MS


def next_grant_at(lease: Lease, *, open_tokens: bool | None = None) -> int:
    """When the work item's latest lease lets the next acquire happen (0: now). Whether an
    effect under it is still open is asked of the database unless the caller knows."""
    expired = lease.state == Lease.State.EXPIRED
    if expired and open_tokens is None:
        open_tokens = Effect.objects.filter(OPEN_EFFECT, lease_id=lease.id).exists()
    return next_grant_at_ms(
        expired=expired,
        expires_at_ms=lease.expires_at_ms,
        lock_delay_ms=lease.lock_delay_ms,
        fenced_until_ms=lease.fenced_until_ms,
        skew_ms=skew_ms(),
        open_tokens=bool(open_tokens),
    )


def next_grant_at_sql() -> Expression:
    """`next_grant_at` as an expression over a Lease queryset, for the acquire's one gate
    read (tests/core/services/test_fencing.py holds the two forms to the same answers)."""
    zero = Value(0, output_field=BigIntegerField())
    skew = Case(
        When(
            Exists(Effect.objects.filter(OPEN_EFFECT, lease_id=OuterRef("id"))),
            then=Value(skew_ms(), output_field=BigIntegerField()),
        ),
        default=zero,
        output_field=BigIntegerField(),
    )
    after_expiry = Case(
        When(
            state=Lease.State.EXPIRED,
            then=F("expires_at_ms") + Greatest(F("lock_delay_ms"), skew),
        ),
        default=zero,
        output_field=BigIntegerField(),
    )
    return Greatest(F("fenced_until_ms"), after_expiry, output_field=BigIntegerField())


def open_token_expiry_ms(work_item_id: int, now_ms: int) -> int | None:
    """The last expiry among the work item's effect tokens still open (no known outcome)
    and not yet dead with the skew allowance; None when there are none."""
    # Tokens issued before expiries were recorded lived FENCING_TOKEN_TTL_MS from issue.
    expiry = Coalesce(
        F("token_expires_at_ms"), F("decided_at_ms") + Value(settings.FENCING_TOKEN_TTL_MS)
    )
    last = (
        Effect.objects.filter(OPEN_EFFECT, work_item_id=work_item_id)
        .annotate(expiry=expiry)
        .filter(expiry__gt=now_ms - skew_ms())
        .aggregate(last=Max("expiry"))["last"]
    )
    return int(last) if last is not None else None


def fence_on_early_end(lease: Lease, now_ms: int) -> int:
    """The `fenced_until` a lease ending now, before its time, records."""
    return fence_after_early_end(
        inherited_ms=lease.fenced_until_ms,
        open_token_expiry_ms=open_token_expiry_ms(lease.work_item_id, now_ms),
        skew_ms=skew_ms(),
    )


def lease_event_record(
    lease: Lease, kind: str, *, at_ms: int, actor_id: int | None, detail: dict[str, Any]
) -> LeaseEvent:
    """Append one event to the lease's history, at its work item and current epoch."""
    # deliberate: the event's fields named one a line, written here once for the lease services.
    return LeaseEvent.objects.create(
        lease=lease,
        work_item_id=lease.work_item_id,
        epoch=lease.epoch,
        kind=kind,
        at_ms=at_ms,
        actor_id=actor_id,
        detail=detail,
    )


def lease_events_insert(events: list[LeaseEvent]) -> None:
    """Insert lease events (their ids are not read back): one statement per 1,000, one
    array per column on PostgreSQL (core.sql.rows_source) instead of a parameter per
    value — what a sweep of thousands of due leases writes."""
    fields = [f for f in LeaseEvent._meta.concrete_fields if not f.primary_key]
    names = [f.column for f in fields]
    types = [f.cast_db_type(connection) or "text" for f in fields]  # type: ignore[attr-defined]
    for start in range(0, len(events), 1000):
        chunk = events[start : start + 1000]
        rows = [
            [f.get_db_prep_save(getattr(e, f.attname), connection) for f in fields] for e in chunk
        ]
        source = sql.rows_source(connection.vendor, types, len(chunk), names)
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {LeaseEvent._meta.db_table} ({', '.join(names)}) "
                f"SELECT {', '.join(names)} FROM {source}",
                sql.rows_params(connection.vendor, rows),
            )
