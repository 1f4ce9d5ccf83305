"""Blocked work (issue 28, point 1): an item left with effects of no known outcome and no
holder raises one `needs_reconciliation` alert naming the effects, is counted on the live
page and listed on the blocked-work page, and is unblocked by reconciling under standing."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import Alert
from leaseboard.core.services import reconciliation
from leaseboard.core.services.effects import effect_report_outcome
from leaseboard.core.services.leases import lease_release, lease_revoke
from leaseboard.dashboard.selectors.blocked import BlockedFilters, blocked_items
from leaseboard.dashboard.selectors.counters import live_counters
from leaseboard.sweeps.services import sweep_run
from leaseboard.takeovers import services
from tests.builders import age_lease, effect_under, request_for

pytestmark = pytest.mark.usefixtures("fast_passwords")

KIND = "needs_reconciliation"


def _propose(scene, key: str, target: str = "order-7"):  # type: ignore[no-untyped-def]
    return effect_under(scene.lease, scene.agent, key, kind="payment.refund", target=target)


def test_an_expired_holder_with_an_outcome_less_effect_raises_one_alert_naming_it(scene):
    _propose(scene, "r-1", target="order-1")
    known = _propose(scene, "r-2", target="order-2")
    effect_report_outcome(effect_id=known.id, executor=scene.agent, outcome="applied")
    age_lease(scene.lease.id, 60_000)
    sweep_run()
    sweep_run()  # once per lost holder, however many sweeps
    alerts = list(Alert.objects.filter(kind=KIND))
    assert len(alerts) == 1
    alert = alerts[0]
    assert alert.work_item.key == scene.key and alert.resolved_at_ms is None
    assert "payment.refund on order-1" in alert.message and "order-2" not in alert.message
    assert [e["target"] for e in alert.detail["effects"]] == ["order-1"]
    assert live_counters()[1].needs_reconciliation == 1
    page = blocked_items(BlockedFilters())
    assert [b.key for b in page.items] == [scene.key]
    assert [e.target for e in page.items[0].effects] == ["order-1"]
    assert page.items[0].last_lease.state == "expired"


def test_a_release_leaving_unknown_outcomes_raises_it_and_one_with_none_does_not(scene, agent):
    effect = _propose(scene, "r-1")
    effect_report_outcome(effect_id=effect.id, executor=scene.agent, outcome="unknown")
    lease_release(lease_id=scene.lease.id, executor=scene.agent, epoch=scene.lease.epoch)
    assert Alert.objects.filter(kind=KIND, work_item__key=scene.key).count() == 1


def test_a_clean_release_and_a_live_holder_are_not_blocked(scene):
    effect = _propose(scene, "r-1")
    assert live_counters()[1].needs_reconciliation == 0  # its holder may still report
    assert blocked_items(BlockedFilters()).items == []
    effect_report_outcome(effect_id=effect.id, executor=scene.agent, outcome="failed")
    lease_release(lease_id=scene.lease.id, executor=scene.agent, epoch=scene.lease.epoch)
    assert not Alert.objects.filter(kind=KIND).exists()
    assert live_counters()[1].needs_reconciliation == 0


def test_an_operator_revoke_blocks_and_a_takeover_approval_does_not_raise(people, scene, agent):
    _propose(scene, "r-1")
    lease_revoke(
        lease_id=scene.lease.id,
        actor=Actor.human(people.operator),
        reason_category="misbehaving",
        reason_text="double refunds",
    )
    assert Alert.objects.filter(kind=KIND, work_item__key=scene.key).count() == 1
    # A takeover of a live lease hands the item to a person at once: nothing is raised.
    from tests.builders import leased_item

    other, _ = agent()
    lease = leased_item(other, key="live-one")
    effect_under(lease, other, "x-1", kind="payment.refund", target="order-9")
    req = request_for("live-one", people.operator, reason_category="unknown_outcome")
    services.takeover_approve(request_pk=req.id, actor=Actor.human(people.approver), note="ok")
    assert not Alert.objects.filter(kind=KIND, work_item__key="live-one").exists()


def test_taking_over_and_reconciling_unblocks_and_resolves_the_alert(people, scene):
    effect = _propose(scene, "r-1")
    age_lease(scene.lease.id, 60_000)
    sweep_run()
    req = request_for(scene.key, people.operator, reason_category="unknown_outcome")
    page = blocked_items(BlockedFilters(q=scene.key))
    assert page.items[0].pending_takeover_id == req.id
    services.takeover_approve(request_pk=req.id, actor=Actor.human(people.approver), note="ok")
    assert live_counters()[1].needs_reconciliation == 0  # a person holds it now
    # The approval answers the item's other alerts; this one waits for the reconciliation.
    assert Alert.objects.get(kind=KIND).resolved_at_ms is None
    assert Alert.objects.get(kind="expired").resolved_at_ms is not None
    reconciliation.effect_reconcile(
        effect_id=effect.id,
        actor=Actor.human(people.operator),
        resolution="not_applied",
        note="no refund in the ledger",
    )
    assert not Alert.objects.filter(kind=KIND, resolved_at_ms__isnull=True).exists()
