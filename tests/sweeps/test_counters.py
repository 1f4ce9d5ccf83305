"""The sweeps' counters (leaseboard.sweeps.counters), in the real MetricCounter table."""

from __future__ import annotations

import pytest

from leaseboard.sweeps.counters import metric_add, sweep_increments, sweep_metrics_record
from leaseboard.sweeps.models import MetricCounter
from leaseboard.sweeps.report import SweepReport


def test_a_reports_increments_bucket_its_duration_and_latencies():
    report = SweepReport(expired=3, duration_s=0.03)
    report.opened([(1, "expired", 100)], now=800)
    inc = sweep_increments(report)
    assert inc[("sweeps_total", "")] == 1
    assert inc[("sweep_transitions_total", "expired")] == 3
    assert ("sweep_transitions_total", "jeopardy") not in inc  # zero: not written
    assert inc[("sweep_duration_seconds_bucket", "0.025")] == 0
    assert inc[("sweep_duration_seconds_bucket", "0.05")] == 1
    assert inc[("alert_latency_seconds_bucket", "0.5")] == 0
    assert inc[("alert_latency_seconds_bucket", "1.0")] == 1


@pytest.mark.django_db(transaction=True)
def test_counters_add_up_across_calls():
    metric_add({("storm_test", "a"): 2, ("storm_test", "zero"): 0})
    metric_add({("storm_test", "a"): 3})
    sweep_metrics_record(SweepReport(expired=1))
    assert MetricCounter.objects.get(name="storm_test", label="a").value == 5
    assert not MetricCounter.objects.filter(name="storm_test", label="zero").exists()
    assert MetricCounter.objects.get(name="sweep_transitions_total", label="expired").value == 1
