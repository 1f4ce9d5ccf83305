"""What the sweeps expose: Prometheus metrics and the broker check in /healthz."""

from __future__ import annotations

import pytest
from prometheus_client.core import CollectorRegistry

from leaseboard.core.models import Lease
from leaseboard.sweeps import services
from leaseboard.sweeps.metrics import DatabaseCollector
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


@pytest.mark.django_db
def test_the_collector_reads_the_figures_from_the_database_at_each_scrape(agent):
    """leaseboard.sweeps.metrics on its own: what a scrape reads is the database's now, so
    every web process reports the same figures."""
    registry = CollectorRegistry()
    registry.register(DatabaseCollector())
    executor, _ = agent()
    assert registry.get_sample_value("leaseboard_leases", {"certainty": "active"}) in (None, 0)
    bulk_leases(2, prefix="c-", holder=executor, jeopardy_in_ms=5_000, expires_in_ms=10_000)
    assert registry.get_sample_value("leaseboard_leases", {"certainty": "active"}) == 2
    assert registry.get_sample_value("leaseboard_live_lease_renewals") == 2
    # By stored state: a lease past its jeopardy time counts as jeopardy once a sweep (or a
    # lazy check) has written it so, read at the next scrape.
    bulk_leases(1, prefix="d-", holder=executor, jeopardy_in_ms=-500, expires_in_ms=10_000)
    assert registry.get_sample_value("leaseboard_leases", {"certainty": "active"}) == 3
    Lease.objects.filter(work_item__key__startswith="d-").update(state="jeopardy")
    assert registry.get_sample_value("leaseboard_leases", {"certainty": "jeopardy"}) == 1
    assert registry.get_sample_value("leaseboard_leases", {"certainty": "active"}) == 2
