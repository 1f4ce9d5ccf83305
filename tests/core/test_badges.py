"""The header's counts registered by the apps that own the rows (leaseboard/core/badges.py):
each app's selector is there after start-up, and the page header counts them in one query."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaseboard.core import badges
from leaseboard.core.models import Effect
from leaseboard.core.selectors import effects_awaiting_approval
from leaseboard.domain.policy import RuleSpec
from leaseboard.takeovers.models import TakeoverRequest
from leaseboard.takeovers.selectors.requests import takeover_requests_pending
from leaseboard.web.pages import badge_and_sweeps, pending_badge_count
from tests.builders import effect_rules, effect_under, leased_item


def test_each_app_registered_its_selector_at_start_up() -> None:
    assert badges.awaiting_approver() == [effects_awaiting_approval, takeover_requests_pending]
    clock = badges.sweep_clock()
    assert clock is not None and clock().model._meta.label == "sweeps.SweepState"
    assert effects_awaiting_approval().model is Effect
    assert takeover_requests_pending().model is TakeoverRequest


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_pending_badge_counts_effects_waiting_under_a_live_lease_in_one_query(agent) -> None:  # type: ignore[no-untyped-def]
    from leaseboard.core.services.leases import lease_release

    executor, _ = agent()
    leases = [leased_item(executor, key=f"badge-{n}") for n in range(3)]
    effect_rules(
        leases[0].work_item.queue, RuleSpec(name="ask", kind="*", decision="require_approval")
    )
    for n, lease in enumerate(leases):
        effect_under(lease, executor, f"k{n}", kind="payment.refund", target=f"t{n}")
    with CaptureQueriesContext(connection) as queries:
        assert pending_badge_count() == 3
    assert len(queries) == 1
    lease_release(lease_id=leases[2].id, executor=executor, epoch=leases[2].epoch)
    assert pending_badge_count() == 2  # its lease ended: nobody can approve it any more


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_alert_badge_and_the_sweeps_clock_are_one_query() -> None:
    with CaptureQueriesContext(connection) as queries:
        count, age = badge_and_sweeps()
    assert count == 0 and len(queries) == 1
    assert age is not None
