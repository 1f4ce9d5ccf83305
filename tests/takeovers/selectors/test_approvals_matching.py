"""Decide by query's selection: waiting effects with a live lease, by kind, queue, agent and
work key."""

from __future__ import annotations

import pytest
from django.http import QueryDict

from leaseboard.core.services.leases import lease_release
from leaseboard.domain.policy import RuleSpec
from leaseboard.takeovers.selectors.approvals_matching import EffectFilters, effects_matching
from tests.builders import effect_rules, effect_under, leased_item

pytestmark = pytest.mark.django_db


def test_it_selects_waiting_effects_whose_lease_is_live_by_the_filter(agent):
    refunder, _ = agent("refund-bot")
    other, _ = agent("other-bot")
    made = {}
    for i, (bot, kind) in enumerate(
        [(refunder, "payment.refund"), (refunder, "payment.void"), (other, "payment.refund")]
    ):
        lease = leased_item(bot, key=f"eq-{i}")
        if i == 0:
            effect_rules(
                lease.work_item.queue,
                RuleSpec(name="all", kind="payment.*", decision="require_approval"),
            )
        made[i] = effect_under(
            lease, bot, f"k-{i}", kind=kind, target=f"t-{i}", payload={"amount_cents": 5}
        )
    lapsed = leased_item(refunder, key="eq-lapsed")
    made["lapsed"] = effect_under(lapsed, refunder, "k-l", kind="payment.refund", target="t-l")
    lease_release(lease_id=lapsed.id, executor=refunder, epoch=lapsed.epoch)

    matching = effects_matching(QueryDict("kind=payment.refund&agent=refund-bot"))
    assert [r.effect.id for r in matching.rows] == [made[0].id]  # the lapsed one is not
    assert matching.rows[0].summary == [("amount_cents", "5")]
    assert matching.total == 1 and matching.query == {
        "kind": "payment.refund",
        "agent": "refund-bot",
    }
    assert effects_matching(QueryDict("q=eq-2")).total == 1
    assert EffectFilters.from_query(QueryDict("queue=%00x")).queue != "\x00x"
