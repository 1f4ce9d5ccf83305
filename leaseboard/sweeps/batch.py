"""One sweep batch (docs/design.md §8): claim due leases through the partial index
`lease_due_idx` with `FOR UPDATE SKIP LOCKED` (concurrent sweeps split the work, a killed
sweep leaves nothing but row locks PostgreSQL drops with the connection), plan each
lease's transition, re-check every claimed lease against the version read before writing
(compare-and-set), and write: jeopardy and expiry (one statement each for the batch, on the
claimed rows; expiry is core's one expiry path), recovery grace after an outage, or only a
later due time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import F

from leaseboard.core import sql, sql_batch
from leaseboard.core.clock import db_now_ms
from leaseboard.core.dbfaults import long_bounds
from leaseboard.core.models import Alert, Lease, LeaseEvent
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.core.services.alerts import (
    BurstJoins,
    alerts_fold_written,
    burst_joins_plan,
    expiry_alert_kind,
    lease_alert_key,
)
from leaseboard.core.services.leases.base import lease_events_insert
from leaseboard.core.services.leases.ending import lease_rows_expire_locked
from leaseboard.core.signals import alerts_opened
from leaseboard.sweeps.outage import Claimed, OutageWindow
from leaseboard.sweeps.report import EXPIRE, JEOPARDY, RECOVER, REDUE, SweepReport

JEOPARDY_KIND = Alert.Kind.JEOPARDY.value


def _plan(lease: Claimed, now: int, window: OutageWindow | None) -> str:
    if window is not None and window.covers(lease) and lease.max_expires_at_ms > now:
        return RECOVER
    if now >= lease.expires_at_ms:
        return EXPIRE
    if lease.state == Lease.State.ACTIVE and now >= lease.jeopardy_at_ms:
        return JEOPARDY
    return REDUE  # due_at is behind the stored times; only move it forward


# What a claim reads of each due lease: enough to plan its transition and to check, before
# the write, that it is still the version read (compare-and-set), plus its holder's name.
_CLAIMED = (
    "id",
    "work_item_id",
    "state",
    "epoch",
    "renewed_at_ms",
    "jeopardy_at_ms",
    "expires_at_ms",
    "max_expires_at_ms",
    "due_at_ms",
    "ttl_ms",
    "holder_id",
    "holder_name",
    "holder_kind",
)


@transaction.atomic(durable=True)
def sweep_batch(
    *,
    batch_size: int,
    window: OutageWindow | None,
    report: SweepReport,
    before_write: Callable[[list[Any]], None] | None,
) -> int:
    """Claim up to `batch_size` due leases and transition them, in one transaction.
    Returns how many were claimed (fewer than `batch_size`: none is left due)."""
    long_bounds()  # no hot path: batches are sized to finish far inside them
    now = db_now_ms()
    claimed = _claim(now, batch_size)
    if not claimed:
        return 0
    if before_write is not None:
        before_write(claimed)
    plans: dict[str, list[Any]] = {JEOPARDY: [], EXPIRE: [], RECOVER: [], REDUE: []}
    for row in claimed:
        plans[_plan(row, now, window)].append(row)

    # In a storm, the alerts that join a burst already open are born its members.
    bursts = _bursts(plans[JEOPARDY], plans[EXPIRE], now)
    marked, opened = _jeopardy_mark(plans[JEOPARDY], now, bursts)
    report.jeopardy += marked
    report.skipped += len(plans[JEOPARDY]) - marked
    report.opened(opened, now)

    # Expiry on the claimed rows (a storm's whole batch, no model instance), compare-and-set
    # inside its statement.
    _expire(plans[EXPIRE], now, window, report, bursts)

    # The rarer transitions, on model instances. Compare-and-set: only leases still exactly
    # as claimed are written. The row locks make this hold against other transactions; the
    # check also guards this one.
    rest = plans[RECOVER] + plans[REDUE]
    unchanged = _unchanged_ids(rest) if rest else set()
    report.skipped += len(rest) - len(unchanged)
    leases = (
        Lease.objects.select_related("holder")
        .filter(work_item_id__in={row.work_item_id for row in rest})  # each on its shard
        .in_bulk(unchanged)
        if unchanged
        else {}
    )

    def still(plan: str) -> list[Lease]:
        return [leases[row.id] for row in plans[plan] if row.id in leases]

    report.recovered += _recover(still(RECOVER), now)
    _redue(still(REDUE))
    return len(claimed)


def _bursts(jeopardy: list[Any], expire: list[Any], now: int) -> BurstJoins | None:
    """The batch's plan of alerts born into open bursts (alert_bursts.burst_joins_plan):
    each lease's alert kind, jeopardy or its expiry's."""
    rows = [(row.id, row.work_item_id, row.holder_id, JEOPARDY_KIND) for row in jeopardy]
    rows += [
        (row.id, row.work_item_id, row.holder_id, expiry_alert_kind(row.holder_kind))
        for row in expire
    ]
    return burst_joins_plan(rows, now) if rows else None


def _claim(now: int, batch_size: int) -> list[Any]:
    """The due leases, locked, oldest due first; rows, not model instances: a batch of
    jeopardy transitions never builds a Lease."""
    return list(
        Lease.objects.select_for_update(skip_locked=True, no_key=True, of=("self",))
        .filter(state__in=LIVE_STATES, due_at_ms__lte=now)
        .annotate(holder_name=F("holder__name"), holder_kind=F("holder__kind"))
        .order_by("due_at_ms")
        .values_list(*_CLAIMED, named=True)[:batch_size]
    )


def _recover(recovered: list[Lease], now: int) -> int:
    """Overdue after an outage: to jeopardy with a grace of one ttl (within the lease's
    lifetime), each with its event."""
    events: list[LeaseEvent] = []
    for lease in recovered:
        grace_until = min(max(lease.expires_at_ms, now + lease.ttl_ms), lease.max_expires_at_ms)
        Lease.objects.filter(id=lease.id).update(
            state=Lease.State.JEOPARDY, expires_at_ms=grace_until, due_at_ms=grace_until
        )
        events.append(
            LeaseEvent(
                lease_id=lease.id,
                work_item_id=lease.work_item_id,
                epoch=lease.epoch,
                kind=LeaseEvent.Kind.JEOPARDY,
                at_ms=now,
                detail={
                    "recovery": True,
                    "was_due_at_ms": lease.due_at_ms,
                    "was_expires_at_ms": lease.expires_at_ms,
                    "grace_until_ms": grace_until,
                },
            )
        )
    lease_events_insert(events)
    return len(recovered)


def _expire(
    rows: list[Any],
    now: int,
    window: OutageWindow | None,
    report: SweepReport,
    bursts: BurstJoins | None,
) -> None:
    """Expire the claimed rows through core's one expiry path (only those still as claimed);
    count what it expired and the alerts it opened."""
    if not rows:
        return
    expired, opened = lease_rows_expire_locked(
        rows, now, window.blamed_for if window else None, bursts
    )
    report.expired += len(expired)
    report.skipped += len(rows) - len(expired)
    report.opened(opened, now)


def _redue(leases: list[Lease]) -> None:
    for lease in leases:
        nxt = lease.jeopardy_at_ms if lease.state == Lease.State.ACTIVE else lease.expires_at_ms
        Lease.objects.filter(id=lease.id).update(due_at_ms=nxt)


def _jeopardy_mark(
    rows: list[Any], now: int, bursts: BurstJoins | None
) -> tuple[int, list[tuple[int, str, int | None]]]:
    """Move claimed leases that missed their renewals to JEOPARDY, each with its event and
    alert (core.sql_batch.lease_jeopardy_mark: one statement on PostgreSQL). Returns how many
    leases moved, and (id, kind, due time) of each alert opened."""
    if not rows:
        return 0, []
    pk, conn = Lease._meta.pk, connections[DEFAULT_DB_ALIAS]  # looked up once, not per row
    params = sql.rows_params(
        conn.vendor,
        [
            [
                pk.get_db_prep_value(row.id, conn),
                row.state,
                row.epoch,
                row.renewed_at_ms,
                row.expires_at_ms,
                row.due_at_ms,
                lease_alert_key(JEOPARDY_KIND, row.id, row.epoch),
                # A fact that stays true when read later (no countdown frozen into the
                # text); the page shows the expiry time from the detail.
                (
                    f"{row.holder_name} missed its renewals: none for "
                    f"{(row.jeopardy_at_ms - row.renewed_at_ms) / 1000:.1f} s "
                    f"(ttl {row.ttl_ms / 1000:.1f} s)"
                )[:500],
                row.holder_name,
                row.holder_kind,
                now,
                bursts.incident_of.get(row.id) if bursts else None,
            ]
            for row in rows
        ],
    )
    marked, opened = 0, []
    members: dict[int, list[int]] = {}
    with connection.cursor() as cursor:
        for statement in sql_batch.lease_jeopardy_mark(connection.vendor, len(rows)):
            cursor.execute(statement, params)
            for what, alert_id, due, burst in cursor.fetchall():
                if what == "lease":
                    marked += 1
                    continue
                opened.append((int(alert_id), JEOPARDY_KIND, due))
                if burst is not None:
                    members.setdefault(int(burst), []).append(int(alert_id))
    # Recurrences of one agent's jeopardy fold into its open incident, and a burst across
    # agents into one incident of the queue (the alerts born into an open one, counted on
    # it): counted in the metrics as opened (the events happened), notified once.
    notify = alerts_fold_written(
        [alert_id for alert_id, _, _ in opened], members, bursts, (JEOPARDY_KIND,), now
    )
    if notify:
        alerts_opened.send(sender=Alert, alert_ids=notify)
    return marked, opened


def _unchanged_ids(claimed: list[Any]) -> set:
    """Ids of claimed leases whose stored version still equals what the claim read."""
    pk, conn = Lease._meta.pk, connections[DEFAULT_DB_ALIAS]
    rows = [
        [pk.get_db_prep_value(lease.id, conn), *sql_batch.lease_version(lease)] for lease in claimed
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            sql_batch.lease_versions_unchanged(connection.vendor, len(claimed)),
            sql_batch.keyed_params(conn.vendor, rows, [lease.work_item_id for lease in claimed]),
        )
        return {pk.to_python(row[0]) for row in cursor.fetchall()}
