"""Rules for every queue (docs/design.md §9, "no route around a rule"): commit-time rules declared
once for all queues, tried before a queue's own, which can only tighten them. An agent that
may use two queues cannot escape an approval rule by choosing the laxer queue."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import Effect, GlobalPolicy, Queue
from leaseboard.core.services.leases import lease_acquire
from leaseboard.core.services.policy import policy_explain
from leaseboard.domain.errors import PolicyDenied, TakeoverConflict
from leaseboard.domain.policy import RuleSpec
from leaseboard.policy.services import changes, rules
from leaseboard.policy.services.config import config_apply, config_export
from tests.builders import BIG_REFUNDS, admit, effect_rules, effect_under, make_user

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db,
    pytest.mark.usefixtures("fast_passwords"),
]


@pytest.fixture
def admin() -> Actor:
    return Actor.human(make_user("ada-global", "admin"))


def everywhere(admin: Actor, *specs: RuleSpec, default: str = "allow") -> int:
    change = rules.rule_set_change(queue_name=None, rules=list(specs), default=default, actor=admin)
    assert change.applied
    return change.version


def refund(agent, key: str, cents: int, idem: str):  # type: ignore[no-untyped-def]
    lease = lease_acquire(work_key=key, executor=agent).lease
    return effect_under(
        lease, agent, idem, kind="payment.refund", target="order-1", payload={"amount_cents": cents}
    )


def test_an_agent_in_two_queues_cannot_escape_a_rule_for_every_queue(admin, agent):
    """The reproduction's second half: an agent that may use `payments` and `default`
    admits pay-1-alt into `default` (no rules) and proposes a 9,000,000 refund."""
    Queue.objects.create(name="payments")
    everywhere(admin, BIG_REFUNDS)
    bot, _ = agent("both-queues", queues=["payments", "default"])
    admit("pay-1-alt", queue="default")
    effect = refund(bot, "pay-1-alt", 900_000_000, "r-1")
    assert effect.decision == "pending_approval" and not effect.fencing_token
    assert effect.rule_name == "global:big-refunds"
    small = admit("pay-2-alt", queue="default")
    assert refund(bot, small.key, 100, "r-2").decision == "authorized"


def test_a_queue_can_tighten_but_never_loosen_a_rule_for_every_queue(admin):
    Queue.objects.create(name="payments")
    everywhere(admin, BIG_REFUNDS, RuleSpec(name="no-wipes", kind="db.wipe", decision="deny"))
    effect_rules(
        "payments",
        RuleSpec(name="refunds-ok", kind="payment.refund", decision="allow"),
        RuleSpec(name="wipes-ok", kind="db.wipe", decision="allow"),
        RuleSpec(name="no-charges", kind="payment.charge", decision="deny"),
    )

    def decided(kind: str, cents: int = 0) -> tuple[str, str | None]:
        e = policy_explain(
            queue_name="payments", kind=kind, target="t", payload={"amount_cents": cents}
        )
        return e.ruling.decision, e.ruling.rule

    # The queue's allow cannot loosen the global require_approval ...
    assert decided("payment.refund", 900_000_000) == ("require_approval", "global:big-refunds")
    # ... and where the global rules allow (no match, default allow), the queue decides.
    assert decided("payment.refund", 100) == ("allow", "refunds-ok")
    assert decided("payment.charge") == ("deny", "no-charges")  # the queue tightens
    assert decided("db.wipe") == ("deny", "global:no-wipes")  # a global deny is final


def test_a_global_deny_is_final_and_the_queue_rules_are_not_reached(admin):
    everywhere(admin, RuleSpec(name="no-wipes", kind="db.wipe", decision="deny"))
    effect_rules("default", RuleSpec(name="anything", kind="*", decision="allow"))
    e = policy_explain(queue_name="default", kind="db.wipe", target="prod")
    assert [(s.rule, s.outcome) for s in e.ruling.steps] == [
        ("global:no-wipes", "matched"),
        ("anything", "not reached"),
    ]
    assert "every queue" in e.ruling.reason


def test_a_global_default_is_a_floor_for_every_queue(admin):
    """An allow-list for every queue: nothing but what a global rule allows."""
    everywhere(admin, RuleSpec(name="reads", kind="read.*", decision="allow"), default="deny")
    effect_rules("default", RuleSpec(name="all", kind="*", decision="allow"))
    assert policy_explain(queue_name="default", kind="read.row", target="t").ruling.decision == (
        "allow"
    )
    denied = policy_explain(queue_name="default", kind="payment.refund", target="t").ruling
    assert denied.decision == "deny" and denied.rule is None


def test_a_change_to_the_rules_for_every_queue_raises_every_queues_version(admin, agent):
    Queue.objects.create(name="payments")
    versions = dict(Queue.objects.values_list("name", "policy_version"))
    everywhere(admin, BIG_REFUNDS)
    after = dict(Queue.objects.values_list("name", "policy_version"))
    assert all(after[name] == versions[name] + 1 for name in versions)
    assert GlobalPolicy.objects.get(id=1).version >= 1
    bot, _ = agent("v-bot", queues=["payments"])
    admit("v-1", queue="payments")
    effect = refund(bot, "v-1", 100, "v-r1")
    assert effect.policy_version == after["payments"]


def test_effects_are_decided_by_the_new_global_rules_at_once(admin, agent):
    """The compiled rule set is cached by the queue's version, which the global change
    raised: the very next decision sees it."""
    bot, _ = agent("cache-bot", queues=["default"])
    admit("c-1")
    assert refund(bot, "c-1", 900_000_000, "c-r1").decision == "authorized"
    everywhere(admin, RuleSpec(name="no-refunds", kind="payment.refund", decision="deny"))
    admit("c-2")
    with pytest.raises(PolicyDenied):
        refund(bot, "c-2", 100, "c-r2")
    assert Effect.objects.get(idempotency_key="c-r2").rule_name == "global:no-refunds"


def test_under_four_eyes_rules_for_every_queue_wait_and_a_moved_on_queue_proposal_is_stale(
    settings,
):
    settings.LEASEBOARD_POLICY_FOUR_EYES = True
    ada = Actor.human(make_user("ada-4e", "admin"))
    bo = Actor.human(make_user("bo-4e", "admin"))
    queue_change = rules.rule_set_change(
        queue_name="default",
        rules=[RuleSpec(name="q", kind="x.*", decision="deny")],
        default="allow",
        actor=ada,
    )
    global_change = rules.rule_set_change(
        queue_name=None, rules=[BIG_REFUNDS], default="allow", actor=ada
    )
    assert not global_change.applied and global_change.proposal is not None
    assert global_change.proposal.queue_id is None
    changes.change_approve(change_id=global_change.proposal.pk, actor=bo)
    assert rules.rules_of(None) == [BIG_REFUNDS]
    # The queue's proposal was made on a version the global change has moved on from.
    assert queue_change.proposal is not None
    with pytest.raises(TakeoverConflict, match="changed since"):
        changes.change_approve(change_id=queue_change.proposal.pk, actor=bo)


def test_the_rules_for_every_queue_travel_in_the_configuration_file(admin):
    everywhere(admin, BIG_REFUNDS)
    doc = config_export()
    assert doc["global"]["rules"][0]["name"] == "big-refunds"
    doc["global"]["rules"].append({"name": "no-wipes", "kind": "db.wipe", "decision": "deny"})
    applied = config_apply(doc, actor=admin)
    assert [c.what for c in applied.plan.changes] == ["rules for every queue"]
    assert [r.name for r in rules.rules_of(None)] == ["big-refunds", "no-wipes"]
    assert not config_apply(doc, actor=admin).plan.changes
    doc["global"]["rules"][1]["when"] = "payload.x >"
    from leaseboard.policy.services.common import SettingsInvalid

    with pytest.raises(SettingsInvalid) as caught:
        config_apply(doc, actor=admin)
    assert "global.rules[1].when" in caught.value.errors


def test_approval_terms_of_both_layers_take_the_stricter(admin, agent):
    everywhere(
        admin,
        RuleSpec(
            name="slow-ok",
            kind="payment.*",
            decision="require_approval",
            decide_within_ms=3_600_000,
            on_timeout="approve",
        ),
    )
    effect_rules(
        "default",
        RuleSpec(
            name="fast-no",
            kind="payment.*",
            decision="require_approval",
            decide_within_ms=60_000,
            on_timeout="reject",
        ),
    )
    bot, _ = agent("terms", queues=["default"])
    admit("t-1")
    effect = refund(bot, "t-1", 1, "t-r1")
    assert effect.decision == "pending_approval" and effect.rule_name == "global:slow-ok"
    assert effect.on_timeout == "reject"
    assert effect.decide_by_ms - effect.proposed_at_ms == 60_000
