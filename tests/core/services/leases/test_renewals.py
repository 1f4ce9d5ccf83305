"""Renewals (leaseboard.core.services.leases.renewals), on real PostgreSQL: a renew is a
compare-and-set on (lease, holder, epoch, live state) that keeps the epoch; a batch is
answered per entry, in order, each refusal with its code, and over the batch limit it is
refused whole."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaseboard.core.models import Alert, Lease, LeaseEvent
from leaseboard.core.services.leases.renewals import BatchResult, lease_renew, lease_renew_many
from leaseboard.domain.errors import LeaseboardError, StaleEpoch, ValidationFailed
from tests.builders import age_leases, jeopardy_stored, leased_item

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


def _batch_queries(executor, items) -> tuple[list[BatchResult], int]:
    with CaptureQueriesContext(connection) as captured:
        results = lease_renew_many(executor=executor, items=items)
    return results, len(captured.captured_queries)


def test_a_batch_of_expired_leases_is_explained_in_a_few_statements_whatever_its_size(
    agent,
) -> None:
    """A fleet whose renewals fell behind sends its expired leases in one batch: each is
    refused with the single renew's code, and ten of them or forty cost the same reads
    (not one locking transaction each)."""
    executor, _ = agent()
    other, _ = agent()
    few = [leased_item(executor, key=f"exp-few-{i}", ttl_ms=2_000) for i in range(10)]
    many = [leased_item(executor, key=f"exp-many-{i}", ttl_ms=2_000) for i in range(40)]
    theirs = leased_item(other, key="exp-theirs")
    age_leases(5_000, lease_ids=[lease.id for lease in few + many])
    few_results, few_queries = _batch_queries(executor, [(lease.id, 1) for lease in few])
    items = [(lease.id, 1) for lease in many] + [(theirs.id, 1), (many[0].id, 7)]
    many_results, many_queries = _batch_queries(executor, items)
    assert few_queries == many_queries
    assert {r.code for r in few_results} == {"lease_expired"}
    codes = [r.code for r in many_results]
    assert codes == ["lease_expired"] * 40 + ["not_holder", "stale_epoch"]
    # The codes and words a single renew gives for the same lease.
    for lease, result in [(many[3], many_results[3]), (theirs, many_results[40])]:
        with pytest.raises(LeaseboardError) as single:
            lease_renew(lease_id=lease.id, executor=executor, epoch=1)
        assert (single.value.code, single.value.detail) == (result.code, result.detail)
    # Refused, so nothing written: the stored state stays for the sweep to expire.
    assert not Lease.objects.filter(id__in=[x.id for x in many], renew_count__gt=0).exists()


def test_a_batch_brings_its_leases_in_jeopardy_back_each_with_its_event(agent) -> None:
    executor, _ = agent()
    back = [leased_item(executor, key=f"jeo-b-{i}", ttl_ms=9_000) for i in range(3)]
    healthy = leased_item(executor, key="jeo-b-ok", ttl_ms=9_000)
    gone = leased_item(executor, key="jeo-b-gone", ttl_ms=2_000)
    for lease in back:
        jeopardy_stored(lease)
    age_leases(5_000, lease_ids=[gone.id])
    items = [(lease.id, 1) for lease in back] + [(healthy.id, 1), (gone.id, 1), (back[0].id, 1)]
    results = lease_renew_many(executor=executor, items=items)
    assert [(r.ok, r.code) for r in results] == [(True, None)] * 4 + [
        (False, "lease_expired"),
        (True, None),
    ]
    assert all(0 < (r.expires_in_ms or 0) <= 9_000 for r in results if r.ok)
    assert set(
        Lease.objects.filter(id__in=[x.id for x in back]).values_list("state", flat=True)
    ) == {"active"}
    assert LeaseEvent.objects.filter(lease__in=back, kind="recovered").count() == 3
    assert not Alert.objects.filter(lease__in=back, resolved_at_ms__isnull=True).exists()
    assert LeaseEvent.objects.filter(lease=healthy, kind="recovered").count() == 0
