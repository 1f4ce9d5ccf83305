"""One sweep batch (leaseboard.sweeps.batch): claim, plan, compare-and-set, write."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from leaseboard.core.models import Lease
from leaseboard.sweeps.batch import _plan, sweep_batch
from leaseboard.sweeps.outage import OutageWindow
from leaseboard.sweeps.report import EXPIRE, JEOPARDY, RECOVER, REDUE, SweepReport
from tests.builders import age_leases, leased_item


def _row(**kw):  # type: ignore[no-untyped-def]
    values = {
        "state": "active",
        "ttl_ms": 100,
        "jeopardy_at_ms": 60,
        "expires_at_ms": 100,
        "max_expires_at_ms": 10_000,
        "due_at_ms": 60,
    }
    return SimpleNamespace(**{**values, **kw})


def test_the_plan_follows_the_stored_times_and_the_outage_window():
    assert _plan(_row(), 50, None) == REDUE
    assert _plan(_row(), 70, None) == JEOPARDY
    assert _plan(_row(state="jeopardy"), 70, None) == REDUE
    assert _plan(_row(), 100, None) == EXPIRE
    assert _plan(_row(), 500, OutageWindow(0, 500)) == RECOVER


@pytest.mark.django_db
def test_a_batch_claims_what_is_due_and_says_how_many(agent):
    bot = agent("batch-bot")[0]
    leases = [leased_item(bot) for _ in range(3)]
    age_leases(leases[0].ttl_ms + 10, lease_ids=[leases[0].id])
    age_leases(leases[1].jeopardy_after_ms + 10, lease_ids=[leases[1].id])
    seen: list[int] = []
    report = SweepReport()
    claimed = sweep_batch(
        batch_size=10, window=None, report=report, before_write=lambda rows: seen.append(len(rows))
    )
    assert claimed == 2 and seen == [2]
    assert (report.expired, report.jeopardy) == (1, 1)
    states = dict(Lease.objects.values_list("id", "state"))
    assert [states[lease.id] for lease in leases] == ["expired", "jeopardy", "active"]
    assert sorted(report.alerts_by_kind.elements()) == ["expired", "jeopardy"]
    assert sweep_batch(batch_size=10, window=None, report=report, before_write=None) == 0
