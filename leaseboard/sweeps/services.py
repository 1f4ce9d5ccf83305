"""The lease sweep, outage recovery, and retention (docs/design.md §8, §11).

A sweep claims leases whose `due_at_ms` has passed through the partial index
`lease_due_idx`, in bounded batches with `FOR UPDATE SKIP LOCKED`, each batch its own
transaction, so cost follows the due leases, concurrent sweeps split the work, and a killed
sweep leaves nothing behind but row locks PostgreSQL drops with the connection. Before it
writes, a batch re-checks every claimed lease against the version it read (compare-and-set);
alerts are unique per (kind, lease, epoch) through `Alert.dedupe_key`. No locks with TTLs.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F

from leaseboard.core import sql
from leaseboard.core.clock import DbNowMs, db_now_ms
from leaseboard.core.dbfaults import long_bounds
from leaseboard.core.models import Alert, Lease, LeaseEvent
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.core.services.alerts import alerts_fold, alerts_open
from leaseboard.core.services.approvals import approvals_expire_due
from leaseboard.core.services.leases import leases_expire_locked
from leaseboard.core.services.leases.base import lease_events_insert
from leaseboard.core.signals import alerts_opened
from leaseboard.sweeps.approver_notices import approval_reminders_open_due
from leaseboard.sweeps.models import MetricCounter, NotificationDelivery, SweepState
from leaseboard.takeovers.sweep import takeover_sweep_step

log = logging.getLogger(__name__)

# Latency buckets (seconds) for "due time -> alert opened".
LATENCY_BUCKETS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

JEOPARDY, EXPIRE, RECOVER, REDUE = "jeopardy", "expire", "recover", "redue"


@dataclass
class SweepReport:
    jeopardy: int = 0
    expired: int = 0
    recovered: int = 0  # overdue after an outage: moved to jeopardy with a grace
    skipped: int = 0  # changed between claim and write; left alone
    batches: int = 0
    more: bool = False  # stopped at max_batches with work left; the next tick continues
    recovery_alert_id: int | None = None
    alert_ids: list[int] = field(default_factory=list)
    steps: dict[str, int] = field(default_factory=dict)
    duration_s: float = 0.0
    alerts_by_kind: Counter = field(default_factory=Counter)
    latencies_s: list[float] = field(default_factory=list)


class Claimed(Protocol):
    """What a sweep's claim reads of a due lease (a row of `_CLAIMED`, or a Lease)."""

    state: str
    ttl_ms: int
    jeopardy_at_ms: int
    expires_at_ms: int
    max_expires_at_ms: int
    due_at_ms: int


@dataclass(frozen=True)
class OutageWindow:
    from_ms: int
    to_ms: int
    cause: str = ""  # SweepState.OutageCause, or "" (not known)

    def covers(self, lease: Claimed) -> bool:
        """A lease that fell due while nothing swept, for longer than its own ttl."""
        return self.from_ms < lease.due_at_ms <= self.to_ms and (
            self.to_ms - self.from_ms > lease.ttl_ms
        )

    def blamed_for(self, lease: Lease) -> dict[str, Any] | None:
        """The outage as the cause of this lease's expiry, or None: only a database outage
        (no renewal could commit during it), only a lease still live when it began whose
        holder has not renewed since it ended (so it expired during it, or at the end of
        the recovery grace). Goes into the expiry alert's detail."""
        if self.cause != SweepState.OutageCause.DATABASE_UNAVAILABLE:
            return None
        if lease.renewed_at_ms >= self.to_ms or lease.expires_at_ms <= self.from_ms:
            return None
        return {
            "cause": self.cause,
            "outage_from_ms": self.from_ms,
            "outage_to_ms": self.to_ms,
        }


def sweep_run(
    *,
    batch_size: int | None = None,
    max_batches: int | None = None,
    before_write: Callable[[list[Lease]], None] | None = None,
    outage_cause: str = "",
) -> SweepReport:
    """One sweep: stamp the sweep clock, then claim and transition due leases batch by
    batch, then expire takeover requests and lapsed standing (leaseboard.takeovers, below
    sweeps in the layer order). `before_write` is a test seam called inside each batch
    transaction between the claim and the write. `outage_cause` is what the caller saw of
    the sweeps since the last one that ran (the task: `database_unavailable` when its own
    sweeps failed on the database), for a gap this sweep finds."""
    started = time.monotonic()
    batch_size = batch_size or settings.LEASEBOARD_SWEEP_BATCH
    max_batches = max_batches or settings.LEASEBOARD_SWEEP_MAX_BATCHES
    report = SweepReport()
    window = sweep_clock_tick(report, outage_cause=outage_cause)
    for _ in range(max_batches):
        claimed = _sweep_batch(
            batch_size=batch_size, window=window, report=report, before_write=before_write
        )
        report.batches += 1
        if claimed < batch_size:
            break
    else:
        report.more = True
    try:
        report.steps["takeovers"] = takeover_sweep_step(batch_size=batch_size)
    except Exception:  # a broken step must not stop lease expiry; it is logged
        log.exception("sweep step takeovers failed")
    try:
        report.steps["approvals"] = approvals_expire_due(batch=batch_size)
        report.steps["approval_reminders"] = approval_reminders_open_due(batch=batch_size)
    except Exception:
        log.exception("sweep step approvals failed")
    report.duration_s = time.monotonic() - started
    _record_metrics(report)
    # Completed: its age is how long expiry has been stopped (/healthz, /metrics, banner).
    SweepState.objects.filter(id=1).update(last_completed_at_ms=DbNowMs())
    return report


@transaction.atomic(durable=True)
def sweep_clock_tick(
    report: SweepReport | None = None, *, outage_cause: str = ""
) -> OutageWindow | None:
    """Stamp the sweep clock. A gap since the previous sweep longer than
    LEASEBOARD_OUTAGE_MIN_MS is recorded as an outage window (with its cause:
    `outage_cause`, else `sweeps_stopped`) and, if any lease fell due in it for longer than
    its ttl, raises ONE summary alert. Returns the current window."""
    long_bounds()  # no hot path: batches are sized to finish far inside them
    now = db_now_ms()
    SweepState.objects.bulk_create([SweepState(id=1, last_sweep_at_ms=now)], ignore_conflicts=True)
    state = SweepState.objects.select_for_update(no_key=True).get(id=1)
    gap = now - state.last_sweep_at_ms
    if gap > settings.LEASEBOARD_OUTAGE_MIN_MS:
        state.outage_from_ms, state.outage_to_ms = state.last_sweep_at_ms, now
        state.outage_cause = outage_cause or SweepState.OutageCause.SWEEPS_STOPPED
        unavailable = state.outage_cause == SweepState.OutageCause.DATABASE_UNAVAILABLE
        affected = Lease.objects.filter(
            state__in=LIVE_STATES,
            due_at_ms__gt=state.outage_from_ms,
            due_at_ms__lte=now,
            ttl_ms__lt=gap,
        ).count()  # bounded by the leases that fell due in the window (lease_due_idx)
        log.warning(
            "sweeps were away for %d ms (%s); %d leases get a recovery grace",
            gap,
            state.outage_cause,
            affected,
        )
        if affected:
            ids = alerts_open(
                [
                    Alert(
                        kind=Alert.Kind.RECOVERY,
                        dedupe_key=f"recovery:{state.outage_from_ms}",
                        message=(
                            (
                                f"The database was unavailable for {gap / 1000:.1f} s: no "
                                "renewal or sweep could commit; "
                                if unavailable
                                else f"No sweep ran for {gap / 1000:.1f} s; "
                            )
                            + f"{affected} overdue leases moved to jeopardy with a recovery "
                            "grace instead of expiring"
                        ),
                        detail={
                            "cause": state.outage_cause,
                            "outage_from_ms": state.outage_from_ms,
                            "outage_to_ms": now,
                            "gap_ms": gap,
                            "leases": affected,
                        },
                        due_at_ms=state.outage_from_ms,
                        opened_at_ms=now,
                    )
                ]
            )
            if report is not None and ids:
                report.recovery_alert_id = ids[0]
                report.alert_ids.extend(ids)
                report.alerts_by_kind[Alert.Kind.RECOVERY.value] += 1
    state.last_sweep_at_ms = max(state.last_sweep_at_ms, now)
    state.save()
    if state.outage_from_ms is None or state.outage_to_ms is None:
        return None
    return OutageWindow(state.outage_from_ms, state.outage_to_ms, state.outage_cause)


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
    "state",
    "epoch",
    "renewed_at_ms",
    "jeopardy_at_ms",
    "expires_at_ms",
    "max_expires_at_ms",
    "due_at_ms",
    "ttl_ms",
    "holder_name",
    "holder_kind",
)


@transaction.atomic(durable=True)
def _sweep_batch(
    *,
    batch_size: int,
    window: OutageWindow | None,
    report: SweepReport,
    before_write: Callable[[list[Any]], None] | None,
) -> int:
    long_bounds()  # no hot path: batches are sized to finish far inside them
    now = db_now_ms()
    # Rows, not model instances: a batch of jeopardy transitions never builds a Lease.
    claimed = list(
        Lease.objects.select_for_update(skip_locked=True, no_key=True, of=("self",))
        .filter(state__in=LIVE_STATES, due_at_ms__lte=now)
        .annotate(holder_name=F("holder__name"), holder_kind=F("holder__kind"))
        .order_by("due_at_ms")
        .values_list(*_CLAIMED, named=True)[:batch_size]
    )
    if not claimed:
        return 0
    if before_write is not None:
        before_write(claimed)
    plans: dict[str, list[Any]] = {JEOPARDY: [], EXPIRE: [], RECOVER: [], REDUE: []}
    for row in claimed:
        plans[_plan(row, now, window)].append(row)

    marked, opened = _jeopardy_mark(plans[JEOPARDY], now)
    report.jeopardy += marked
    report.skipped += len(plans[JEOPARDY]) - marked

    # The rarer transitions, on model instances. Compare-and-set: only leases still exactly
    # as claimed are written. The row locks make this hold against other transactions; the
    # check also guards this one.
    rest = plans[EXPIRE] + plans[RECOVER] + plans[REDUE]
    unchanged = _unchanged_ids(rest) if rest else set()
    report.skipped += len(rest) - len(unchanged)
    leases = Lease.objects.select_related("holder").in_bulk(unchanged) if unchanged else {}

    def still(plan: str) -> list[Lease]:
        return [leases[row.id] for row in plans[plan] if row.id in leases]

    recovered = still(RECOVER)
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
    report.recovered += len(recovered)

    expired = still(EXPIRE)
    expiry_alert_ids = leases_expire_locked(
        expired, now, window.blamed_for if window is not None else None
    )
    report.expired += len(expired)

    for lease in still(REDUE):
        nxt = lease.jeopardy_at_ms if lease.state == Lease.State.ACTIVE else lease.expires_at_ms
        Lease.objects.filter(id=lease.id).update(due_at_ms=nxt)

    if expiry_alert_ids:
        opened += Alert.objects.filter(id__in=expiry_alert_ids).values_list(
            "id", "kind", "due_at_ms"
        )
    for alert_id, kind, due in opened:
        report.alert_ids.append(alert_id)
        report.alerts_by_kind[kind] += 1
        report.latencies_s.append(max(0, now - (due or now)) / 1000)
    return len(claimed)


def _jeopardy_mark(rows: list[Any], now: int) -> tuple[int, list[tuple[int, str, int | None]]]:
    """Move claimed leases that missed their renewals to JEOPARDY, each with its event and
    alert (core.sql.lease_jeopardy_mark: one statement on PostgreSQL). Returns how many
    leases moved, and (id, kind, due time) of each alert opened."""
    if not rows:
        return 0, []
    pk = Lease._meta.pk
    params = sql.rows_params(
        connection.vendor,
        [
            [
                pk.get_db_prep_value(row.id, connection),
                row.state,
                row.epoch,
                row.renewed_at_ms,
                row.expires_at_ms,
                row.due_at_ms,
                f"{Alert.Kind.JEOPARDY.value}:{row.id}:{row.epoch}",
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
            ]
            for row in rows
        ],
    )
    marked, opened = 0, []
    with connection.cursor() as cursor:
        for statement in sql.lease_jeopardy_mark(connection.vendor, len(rows)):
            cursor.execute(statement, params)
            for what, alert_id, due in cursor.fetchall():
                if what == "lease":
                    marked += 1
                else:
                    opened.append((int(alert_id), Alert.Kind.JEOPARDY.value, due))
    # Recurrences of one agent's jeopardy fold into its open incident: counted in the
    # metrics as opened (the events happened), not notified again.
    notify = alerts_fold([alert_id for alert_id, _, _ in opened])
    if notify:
        alerts_opened.send(sender=Alert, alert_ids=notify)
    return marked, opened


def _unchanged_ids(claimed: list[Any]) -> set:
    """Ids of claimed leases whose stored version still equals what the claim read."""
    pk = Lease._meta.pk
    rows: list[list[Any]] = [
        [
            pk.get_db_prep_value(lease.id, connection),
            lease.state,
            lease.epoch,
            lease.renewed_at_ms,
            lease.expires_at_ms,
            lease.due_at_ms,
        ]
        for lease in claimed
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            sql.lease_versions_unchanged(connection.vendor, len(claimed)),
            sql.rows_params(connection.vendor, rows),
        )
        return {pk.to_python(row[0]) for row in cursor.fetchall()}


def _bucket_counts(values: list[float], buckets: tuple[float, ...]) -> dict[str, float]:
    out: dict[str, float] = {}
    for le in buckets:
        out[repr(le)] = float(sum(1 for v in values if v <= le))
    out["+Inf"] = float(len(values))
    return out


def _record_metrics(report: SweepReport) -> None:
    """Add this sweep's figures to the shared counters (one short transaction, after the
    batches, so concurrent sweeps never serialize on counter rows while holding leases)."""
    inc: dict[tuple[str, str], float] = {
        ("sweeps_total", ""): 1,
        ("sweep_duration_seconds_sum", ""): report.duration_s,
    }
    for le, n in _bucket_counts([report.duration_s], DURATION_BUCKETS).items():
        inc[("sweep_duration_seconds_bucket", le)] = n
    for key, n in (
        ("jeopardy", report.jeopardy),
        ("expired", report.expired),
        ("recovered", report.recovered),
        ("skipped", report.skipped),
    ):
        if n:
            inc[("sweep_transitions_total", key)] = n
    for kind, n in report.alerts_by_kind.items():
        inc[("alerts_opened_total", kind)] = n
    if report.latencies_s:
        inc[("alert_latency_seconds_sum", "")] = sum(report.latencies_s)
        inc[("alert_latency_seconds_count", "")] = len(report.latencies_s)
        for le, n in _bucket_counts(report.latencies_s, LATENCY_BUCKETS).items():
            inc[("alert_latency_seconds_bucket", le)] = n
    try:
        metric_add(inc)
    except Exception:  # metrics must never fail a sweep
        log.exception("could not record sweep metrics")


@transaction.atomic(durable=True)
def metric_add(increments: dict[tuple[str, str], float]) -> None:
    """Upsert-increment shared counters, in a fixed order so writers never deadlock."""
    items = sorted((k, v) for k, v in increments.items() if v)
    if not items:
        return
    table = MetricCounter._meta.db_table
    sql = (
        f"INSERT INTO {table} (name, label, value) VALUES "
        + ", ".join(["(%s, %s, %s)"] * len(items))
        + f" ON CONFLICT (name, label) DO UPDATE SET value = {table}.value + excluded.value"
    )
    params: list[Any] = []
    for (name, label), value in items:
        params.extend([name, label, float(value)])
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def lease_events_prune(*, older_than_days: int | None = None, batch_size: int = 5000) -> int:
    """Retention: delete lease events older than the configured age, in batches (each its
    own transaction). Renewal history needs no pruning: it is a bounded window plus
    aggregates on the lease row. Delivered notification logs past the age go too."""
    days = older_than_days or settings.LEASEBOARD_EVENT_RETENTION_DAYS
    cutoff = db_now_ms() - days * 86_400_000
    deleted = 0
    while True:
        with transaction.atomic(durable=True):
            long_bounds()
            ids = list(
                LeaseEvent.objects.filter(at_ms__lt=cutoff)
                .order_by("at_ms")
                .values_list("id", flat=True)[:batch_size]
            )
            if ids:
                LeaseEvent.objects.filter(id__in=ids).delete()
        deleted += len(ids)
        if len(ids) < batch_size:
            break
    NotificationDelivery.objects.filter(
        status=NotificationDelivery.Status.DELIVERED,
        alert__opened_at_ms__lt=cutoff,
    ).delete()
    return deleted


def sweep_report_json(report: SweepReport) -> str:
    return json.dumps(
        {
            "jeopardy": report.jeopardy,
            "expired": report.expired,
            "recovered": report.recovered,
            "skipped": report.skipped,
            "batches": report.batches,
            "more": report.more,
            "alerts": len(report.alert_ids),
            "steps": report.steps,
            "duration_ms": round(report.duration_s * 1000, 1),
        }
    )


__all__ = [
    "OutageWindow",
    "SweepReport",
    "alerts_open",
    "lease_events_prune",
    "metric_add",
    "sweep_clock_tick",
    "sweep_run",
]
