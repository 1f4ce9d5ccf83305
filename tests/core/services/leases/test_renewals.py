"""Renewals (leaseboard.core.services.leases.renewals), on real PostgreSQL: a renew is a
compare-and-set on (lease, holder, epoch, live state) that keeps the epoch; a batch is
answered per entry, in order, each refusal with its code, and over the batch limit it is
refused whole."""

from __future__ import annotations

import uuid

import pytest

from leaseboard.core.models import Lease
from leaseboard.core.services.leases.renewals import BatchResult, lease_renew, lease_renew_many
from leaseboard.domain.errors import StaleEpoch, ValidationFailed
from tests.builders import leased_item

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_a_renew_keeps_the_epoch_and_answers_active_within_the_ttl(agent) -> None:
    executor, _ = agent()
    lease = leased_item(executor, key="ren-1", ttl_ms=9_000)
    renewal = lease_renew(lease_id=str(lease.id), executor=executor, epoch=1)
    assert (renewal.lease_id, renewal.epoch, renewal.certainty) == (lease.id, 1, "active")
    assert 0 < renewal.expires_in_ms <= 9_000
    assert renewal.hold_reason == ""
    with pytest.raises(StaleEpoch):
        lease_renew(lease_id=lease.id, executor=executor, epoch=2)
    assert Lease.objects.get(id=lease.id).epoch == 1


def test_a_batch_is_answered_per_entry_in_order_each_refusal_with_its_code(agent) -> None:
    executor, _ = agent()
    other, _ = agent()
    mine = leased_item(executor, key="ren-2")
    theirs = leased_item(other, key="ren-3")
    missing = uuid.uuid4()
    results = lease_renew_many(
        executor=executor,
        items=[
            (mine.id, 1),
            ("nonsense", 1),
            (theirs.id, 1),
            (mine.id, 5),
            (str(missing), 1),
            (str(mine.id), 1),
        ],
    )
    assert [(r.lease_id, r.ok, r.code) for r in results] == [
        (str(mine.id), True, None),
        ("nonsense", False, "not_found"),
        (str(theirs.id), False, "not_holder"),
        (str(mine.id), False, "stale_epoch"),
        (str(missing), False, "not_found"),
        (str(mine.id), True, None),
    ]
    assert all(isinstance(r, BatchResult) for r in results)
    assert results[0].epoch == 1 and results[0].expires_in_ms


def test_a_batch_over_the_limit_is_refused_whole(agent, settings) -> None:
    executor, _ = agent()
    lease = leased_item(executor, key="ren-4")
    settings.LEASEBOARD_MAX_BATCH_RENEW = 2
    with pytest.raises(ValidationFailed):
        lease_renew_many(executor=executor, items=[(lease.id, 1)] * 3)
    assert [r.ok for r in lease_renew_many(executor=executor, items=[(lease.id, 1)] * 2)] == [
        True,
        True,
    ]
