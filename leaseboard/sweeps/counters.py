"""The sweeps' figures in the shared counters (MetricCounter rows, exported by
leaseboard.sweeps.metrics at /metrics): sweeps, their durations, transitions, alerts opened
and their latency (due time -> alert opened), as Prometheus-style buckets."""

from __future__ import annotations

import logging
from typing import Any

from django.db import connection, transaction

from leaseboard.sweeps.models import MetricCounter
from leaseboard.sweeps.report import SweepReport

log = logging.getLogger(__name__)

# Latency buckets (seconds) for "due time -> alert opened".
LATENCY_BUCKETS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def _bucket_counts(values: list[float], buckets: tuple[float, ...]) -> dict[str, float]:
    out: dict[str, float] = {}
    for le in buckets:
        out[repr(le)] = float(sum(1 for v in values if v <= le))
    out["+Inf"] = float(len(values))
    return out


def sweep_increments(report: SweepReport) -> dict[tuple[str, str], float]:
    """The counter increments one sweep's report makes."""
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
    return inc


def sweep_metrics_record(report: SweepReport) -> None:
    """Add this sweep's figures to the shared counters (one short transaction, after the
    batches, so concurrent sweeps never serialize on counter rows while holding leases)."""
    try:
        metric_add(sweep_increments(report))
    except Exception:  # metrics must never fail a sweep
        log.exception("could not record sweep metrics")


@transaction.atomic(durable=True)
def metric_add(increments: dict[tuple[str, str], float]) -> None:
    """Upsert-increment shared counters, in a fixed order so writers never deadlock."""
    items = sorted((k, v) for k, v in increments.items() if v)
    if not items:
        return
    table = MetricCounter._meta.db_table
    statement = (
        f"INSERT INTO {table} (name, label, value) VALUES "
        + ", ".join(["(%s, %s, %s)"] * len(items))
        + f" ON CONFLICT (name, label) DO UPDATE SET value = {table}.value + excluded.value"
    )
    params: list[Any] = []
    for (name, label), value in items:
        params.extend([name, label, float(value)])
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
