"""The lease sweep (docs/design.md §8, §11): stamp the sweep clock (outage recovery,
leaseboard.sweeps.outage), then claim and transition due leases batch by batch
(leaseboard.sweeps.batch), then the other sweeps' steps, then the figures
(leaseboard.sweeps.counters). Retention is leaseboard.sweeps.retention.

A sweep claims leases whose `due_at_ms` has passed through the partial index
`lease_due_idx`, in bounded batches with `FOR UPDATE SKIP LOCKED`, each batch its own
transaction, so cost follows the due leases, concurrent sweeps split the work, and a killed
sweep leaves nothing behind but row locks PostgreSQL drops with the connection. Before it
writes, a batch re-checks every claimed lease against the version it read (compare-and-set);
alerts are unique per (kind, lease, epoch) through `Alert.dedupe_key`. No locks with TTLs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.conf import settings

from leaseboard.core.clock import DbNowMs, db_now_ms
from leaseboard.core.models import Lease
from leaseboard.core.services.alerts import alert_groups_settle, alerts_open
from leaseboard.core.services.approvals import approvals_expire_due
from leaseboard.sweeps.approver_notices import approval_reminders_open_due
from leaseboard.sweeps.batch import sweep_batch
from leaseboard.sweeps.counters import metric_add, sweep_metrics_record
from leaseboard.sweeps.models import SweepState
from leaseboard.sweeps.outage import OutageWindow, sweep_clock_stamp, sweep_clock_tick
from leaseboard.sweeps.report import SweepReport, sweep_report_json
from leaseboard.sweeps.retention import lease_events_prune
from leaseboard.takeovers.sweep import takeover_sweep_step

log = logging.getLogger(__name__)


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
        claimed = sweep_batch(
            batch_size=batch_size, window=window, report=report, before_write=before_write
        )
        report.batches += 1
        sweep_clock_stamp()
        if claimed < batch_size:
            break
    else:
        report.more = True
    _steps(report, batch_size)
    report.duration_s = time.monotonic() - started
    sweep_metrics_record(report)
    # Completed: its age is how long expiry has been stopped (/healthz, /metrics, banner).
    SweepState.objects.filter(id=1).update(last_completed_at_ms=DbNowMs())
    return report


def _steps(report: SweepReport, batch_size: int) -> None:
    """The other sweeps, each on its own: a broken step must not stop lease expiry (it is
    logged). Burst incidents whose leases are all past jeopardy are resolved; takeover
    requests and lapsed standing expire; approvals expire and remind."""
    try:
        if settled := alert_groups_settle():  # in the report only when it did something
            report.steps["alert_groups_settled"] = settled
    except Exception:
        log.exception("sweep step alert groups failed")
    try:
        report.steps["takeovers"] = takeover_sweep_step(batch_size=batch_size)
    except Exception:
        log.exception("sweep step takeovers failed")
    try:
        report.steps["approvals"] = approvals_expire_due(batch=batch_size)
        report.steps["approval_reminders"] = approval_reminders_open_due(batch=batch_size)
    except Exception:
        log.exception("sweep step approvals failed")


__all__ = [
    "OutageWindow",
    "SweepReport",
    "alerts_open",
    "db_now_ms",
    "lease_events_prune",
    "metric_add",
    "sweep_clock_tick",
    "sweep_report_json",
    "sweep_run",
]
