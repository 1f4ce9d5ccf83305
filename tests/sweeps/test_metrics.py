"""What the sweeps expose: Prometheus metrics and the broker check in /healthz."""

from __future__ import annotations

import pytest

from leaseboard.sweeps import services
from tests.builders import bulk_leases

pytestmark = pytest.mark.postgres


@pytest.mark.django_db
def test_metrics_report_certainty_sweeps_alerts_and_latency(agent, client):
    executor, _ = agent()
    bulk_leases(3, prefix="m-", holder=executor, jeopardy_in_ms=-500, expires_in_ms=10_000)
    bulk_leases(2, prefix="n-", holder=executor, jeopardy_in_ms=5_000, expires_in_ms=10_000)
    services.sweep_run()
    text = client.get("/metrics").content.decode()
    assert 'leaseboard_leases{certainty="jeopardy"} 3.0' in text
    assert 'leaseboard_leases{certainty="active"} 2.0' in text
    assert 'leaseboard_alerts_opened_total{kind="jeopardy"} 3.0' in text
    assert "leaseboard_sweeps_total 1.0" in text
    assert 'leaseboard_alert_latency_seconds_bucket{le="1.0"} 3.0' in text
    assert "leaseboard_sweep_duration_seconds_count 1.0" in text
    assert "leaseboard_live_lease_renewals 5.0" in text
    assert "leaseboard_refusals_total" in text or "leaseboard_refusals" in text


@pytest.mark.django_db
def test_healthz_reports_the_broker(client):
    body = client.get("/healthz").json()
    assert "broker" in body["checks"]
    assert body["checks"]["broker"]["ok"] is True
