"""leaseboard.dashboard.selectors.fleet on real PostgreSQL: the charts page's fleet health
counts lease events into time buckets, counts the live leases at the end of each bucket
back from the exact count now, and sorts the live leases by their largest renewal gap."""

from __future__ import annotations

import pytest

from leaseboard.core.services.leases import lease_release, lease_renew
from leaseboard.dashboard.selectors.fleet import GAP_BUCKETS, RANGES, fleet_health
from tests.builders import leased_item

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_an_unknown_range_is_the_last_hour_and_each_range_has_its_buckets(db):  # type: ignore[no-untyped-def]
    health = fleet_health("forever")
    assert health.range == "1h" and len(health.starts) == 60
    for key, (span, step) in RANGES.items():
        h = fleet_health(key)
        assert (h.span_ms, h.bucket_ms, len(h.granted)) == (span, step, span // step)
        assert h.starts[0] == h.now_ms - span and h.starts[1] - h.starts[0] == step


def test_grants_and_endings_land_in_the_latest_bucket_and_the_live_line_counts_back(
    agent, db_clock
):  # type: ignore[no-untyped-def]
    executor, _ = agent()
    leased_item(executor, key="fh-1")
    kept = leased_item(executor, key="fh-2")
    gone = leased_item(executor, key="fh-3")
    lease_release(lease_id=gone.id, executor=executor, epoch=gone.epoch)
    lease_renew(lease_id=kept.id, executor=executor, epoch=kept.epoch)
    db_clock.advance(1_000)  # the events are in the past, inside the last minute's bucket
    health = fleet_health("1h")
    assert (sum(health.granted), health.granted[-1]) == (3, 3)
    assert (sum(health.ended), health.ended[-1]) == (1, 1)
    assert sum(health.expired) == 0
    assert health.live_now == 2
    assert health.live[-1] == 2 and health.live[-2] == 0  # none of them was live before
    gaps = dict(health.gaps)
    assert list(gaps) == [label for label, _ in GAP_BUCKETS]
    assert gaps["not renewed yet"] == 1 and gaps["< 25%"] == 1
    assert sum(gaps.values()) == health.live_now


def test_events_older_than_the_range_are_not_counted(agent, db_clock):  # type: ignore[no-untyped-def]
    executor, _ = agent()
    leased_item(executor, key="fh-old")
    db_clock.advance(2 * 60 * 60_000)  # two hours on
    health = fleet_health("1h")
    assert sum(health.granted) == 0
    assert sum(fleet_health("6h").granted) == 1
