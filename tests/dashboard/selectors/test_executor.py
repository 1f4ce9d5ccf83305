"""leaseboard.dashboard.selectors.executor on real PostgreSQL: an executor's page shows its
live leases (soonest due first) and its ended ones, its refused effects, its quarantine in
force and the renewal health those add up to; an unknown executor has no page."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.services.leases import lease_release, lease_renew, lease_revoke
from leaseboard.dashboard.selectors.executor import executor_page
from leaseboard.domain.errors import PolicyDenied
from tests.builders import age_lease, effect_rules, effect_under, leased_item

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db,
    pytest.mark.usefixtures("fast_passwords"),
]


def test_an_unknown_executor_has_no_page(db):  # type: ignore[no-untyped-def]
    assert executor_page(executor_id=2**31 - 1) is None


def test_live_and_ended_leases_with_their_health(agent, people):  # type: ignore[no-untyped-def]
    executor, _ = agent("worker")
    other, _ = agent("bystander")
    leased_item(other, key="ex-other")
    soon = leased_item(executor, key="ex-soon")
    later = leased_item(executor, key="ex-later")
    lease_renew(lease_id=later.id, executor=executor, epoch=later.epoch)
    age_lease(soon.id, soon.jeopardy_after_ms + 1)  # past its renew-by time: in jeopardy
    released = leased_item(executor, key="ex-released")
    lease_release(lease_id=released.id, executor=executor, epoch=released.epoch)
    revoked = leased_item(executor, key="ex-revoked")
    lease_revoke(
        lease_id=revoked.id,
        actor=Actor.human(people.operator),
        reason_category="misbehaving",
        reason_text="loops",
    )
    page = executor_page(executor_id=executor.id)
    assert page is not None and page.executor == executor
    assert [r.lease.work_item.key for r in page.live] == ["ex-soon", "ex-later"]
    assert sorted(r.lease.work_item.key for r in page.recent) == ["ex-released", "ex-revoked"]
    assert page.health["live"] == 2 and page.health["in_jeopardy"] == 1
    assert page.health["renewals"] >= 1
    assert (page.health["recent_released"], page.health["recent_revoked"]) == (1, 1)
    assert (page.health["recent_expired"], page.health["recent_ended"]) == (0, 2)
    assert page.quarantine is None and page.refusals == []


def test_refused_effects_are_listed_and_allowed_ones_are_not(agent):  # type: ignore[no-untyped-def]
    executor, _ = agent()
    lease = leased_item(executor, key="ex-refuse")
    effect_rules(lease.work_item.queue, ("payment.*", "deny"), ("*", "allow"))

    def propose(kind: str, key: str):  # type: ignore[no-untyped-def]
        return effect_under(lease, executor, key, kind=kind, target="order-1")

    propose("ticket.comment", "ok-1")
    with pytest.raises(PolicyDenied):
        propose("payment.refund", "no-1")
    page = executor_page(executor_id=executor.id)
    assert page is not None
    assert [(e.kind, e.decision) for e in page.refusals] == [("payment.refund", "refused")]


def test_a_quarantine_in_force_is_shown_until_it_is_lifted(agent, people):  # type: ignore[no-untyped-def]
    from leaseboard.core.services import supervision

    executor, _ = agent("loopy")
    leased_item(executor, key="ex-q")
    supervision.agent_quarantine(
        executor_id=executor.id,
        actor=Actor.human(people.operator),
        reason_category="misbehaving",
        reason_text="retries refunds in a loop",
    )
    page = executor_page(executor_id=executor.id)
    assert page is not None and page.quarantine is not None
    assert page.live == [] and page.health["recent_revoked"] == 1
    supervision.agent_quarantine_lift(
        executor_id=executor.id, actor=Actor.human(people.approver), note="fixed"
    )
    page = executor_page(executor_id=executor.id)
    assert page is not None and page.quarantine is None and len(page.quarantines) == 1
