"""What the lease services share (leaseboard.core.services.leases.base), on real
PostgreSQL: lease ids from the wire, the timing a grant gets (defaults, then the queue's,
then the item's, then the grant's own), the reconciliation gate's question, and when the
next grant may happen after an end."""

from __future__ import annotations

import uuid

import pytest
from django.conf import settings

from leaseboard.core.models import Lease
from leaseboard.core.services.effects import effect_propose, effect_report_outcome
from leaseboard.core.services.leases.base import (
    next_grant_at,
    parse_lease_id,
    timing_for,
    unreconciled_effects_exist,
)
from leaseboard.core.services.leases.ending import lease_release
from leaseboard.domain.errors import NotFound, ValidationFailed
from tests.builders import admit, leased_item

pytestmark = pytest.mark.postgres


def test_a_lease_id_is_a_uuid_or_its_text_and_anything_else_is_not_found() -> None:
    lid = uuid.uuid4()
    assert parse_lease_id(lid) is lid
    assert parse_lease_id(str(lid)) == lid
    for raw in ("not-a-uuid", None, 12, "x" * 500):
        with pytest.raises(NotFound) as refused:
            parse_lease_id(raw)
        assert refused.value.code == "not_found"
        assert len(refused.value.detail) < 100  # the echoed id is cut short


@pytest.mark.django_db
def test_the_items_timing_overrides_the_defaults_and_the_grants_ttl_overrides_both() -> None:
    plain = admit("timing-plain")
    assert timing_for(plain) == settings.LEASE_DEFAULTS
    item = admit("timing-own", ttl_ms=9_000)
    own = timing_for(item)
    assert own.ttl_ms == 9_000 and own.renew_after_ms == 3_000  # re-derived from the ttl
    granted = timing_for(item, ttl_ms=6_000, max_lifetime_ms=60_000)
    assert (granted.ttl_ms, granted.max_lifetime_ms, granted.renew_after_ms) == (
        6_000,
        60_000,
        2_000,
    )


@pytest.mark.django_db
def test_an_unsafe_grant_timing_is_refused_naming_the_field() -> None:
    item = admit("timing-bad")
    with pytest.raises(ValidationFailed) as refused:
        timing_for(item, ttl_ms=0)
    assert refused.value.code == "validation_error"
    assert refused.value.extra["param"] == "ttl_ms"


@pytest.mark.django_db
def test_an_effect_is_unreconciled_until_its_outcome_is_known(agent) -> None:
    executor, _ = agent()
    lease = leased_item(executor, key="gate-1")
    item = lease.work_item
    assert not unreconciled_effects_exist(item)
    effect = effect_propose(
        lease_id=lease.id, executor=executor, epoch=1, kind="k", target="t", idempotency_key="g1"
    )
    assert unreconciled_effects_exist(item)
    assert not unreconciled_effects_exist(item, exclude_lease=lease)  # only this lease's
    effect_report_outcome(effect_id=effect.id, executor=executor, outcome="applied")
    assert not unreconciled_effects_exist(item)


@pytest.mark.django_db
def test_a_released_lease_lets_the_next_grant_happen_now(agent) -> None:
    executor, _ = agent()
    lease = leased_item(executor, key="next-1")
    lease_release(lease_id=lease.id, executor=executor, epoch=1)
    lease.refresh_from_db()
    assert lease.state == Lease.State.RELEASED
    assert next_grant_at(lease) == 0
