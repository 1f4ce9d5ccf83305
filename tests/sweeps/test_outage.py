"""The sweep clock and outage windows (leaseboard.sweeps.outage)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from leaseboard.core.models import Alert
from leaseboard.sweeps.models import SweepState
from leaseboard.sweeps.outage import OutageWindow, sweep_clock_tick
from leaseboard.sweeps.report import SweepReport
from tests.builders import age_leases, age_sweep_clock, leased_item


def _lease(**kw):  # type: ignore[no-untyped-def]
    values = {"due_at_ms": 500, "ttl_ms": 100, "renewed_at_ms": 0, "expires_at_ms": 600}
    return SimpleNamespace(**{**values, **kw})


def test_a_window_covers_leases_due_in_it_for_longer_than_their_ttl():
    window = OutageWindow(0, 1000, SweepState.OutageCause.DATABASE_UNAVAILABLE)
    assert window.covers(_lease())
    assert not window.covers(_lease(ttl_ms=5000)) and not window.covers(_lease(due_at_ms=1500))
    assert window.blamed_for(_lease())["outage_to_ms"] == 1000  # type: ignore[index, arg-type]
    assert window.blamed_for(_lease(renewed_at_ms=1000)) is None  # type: ignore[arg-type]
    stopped = OutageWindow(0, 1000, SweepState.OutageCause.SWEEPS_STOPPED)
    assert stopped.blamed_for(_lease()) is None  # type: ignore[arg-type]


@pytest.mark.django_db
def test_a_long_gap_is_a_window_with_one_recovery_alert(agent):
    assert sweep_clock_tick() is None  # the first tick: no gap
    lease = leased_item(agent("gap-bot")[0])
    age_leases(lease.ttl_ms * 3, lease_ids=[lease.id])
    age_sweep_clock(lease.ttl_ms * 3)
    report = SweepReport()
    window = sweep_clock_tick(report, outage_cause="database_unavailable")
    assert window is not None and window.cause == "database_unavailable"
    recovery = Alert.objects.get(kind="recovery")
    assert report.recovery_alert_id == recovery.id
    assert recovery.message.startswith("The database was unavailable for ")
    assert recovery.detail["leases"] == 1
