"""A sweep's report (leaseboard.sweeps.report): what it opened, and its one-line summary."""

from __future__ import annotations

import json

from leaseboard.sweeps.report import SweepReport, sweep_report_json


def test_opened_alerts_count_by_kind_with_their_latency():
    report = SweepReport()
    report.opened([(1, "expired", 1000), (2, "expired", None), (3, "jeopardy", 2500)], now=3000)
    assert report.alert_ids == [1, 2, 3]
    assert report.alerts_by_kind == {"expired": 2, "jeopardy": 1}
    assert report.latencies_s == [2.0, 0.0, 0.5]


def test_the_summary_is_json_with_every_figure():
    report = SweepReport(expired=4, batches=2, more=True, duration_s=0.01234)
    summary = json.loads(sweep_report_json(report))
    assert summary["expired"] == 4 and summary["more"] is True
    assert summary["duration_ms"] == 12.3 and summary["alerts"] == 0
