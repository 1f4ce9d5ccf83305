"""Server-held, single-use approval decisions: made once and bound to the approver who
made it; past the rule's decide-within time the rule's default decision applies (reject
unless the rule says approve, and an approve only for a lease that could propose it now);
never granted for a lease that has ended, nor while it is in jeopardy."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry, Effect
from leaseboard.core.services import approvals
from leaseboard.core.services.leases import lease_release
from leaseboard.domain.errors import (
    AlreadyDecided,
    ApprovalExpired,
    InJeopardy,
    LeaseReleased,
)
from leaseboard.domain.fencing import unverified_claims
from leaseboard.domain.policy import RuleSpec
from leaseboard.sweeps.services import sweep_run
from tests.builders import age_approval, age_lease, effect_rules, effect_under, make_user

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

REFUND = {"amount": "100.00", "currency": "EUR"}


def ask(scene, key: str = "refund-1", **rule: object) -> Effect:  # type: ignore[no-untyped-def]
    effect_rules(
        scene.lease.work_item.queue,
        RuleSpec(name="refunds", kind="payment.*", decision="require_approval", **rule),  # type: ignore[arg-type]
    )
    effect = effect_under(scene.lease, scene.agent, key, payload=REFUND)
    assert effect.decision == "pending_approval" and effect.decide_by_ms is not None
    return effect


def test_a_decision_is_made_once_and_bound_to_its_approver(people, scene):
    effect = ask(scene)
    second = Actor.human(make_user("abe-second", "approver"))
    approvals.effect_approve(effect_id=effect.id, actor=Actor.human(people.approver))
    for decide in (
        lambda: approvals.effect_approve(effect_id=effect.id, actor=second),
        lambda: approvals.effect_reject(effect_id=effect.id, actor=second, note="no"),
        lambda: approvals.effect_approve(effect_id=effect.id, actor=Actor.human(people.approver)),
    ):
        with pytest.raises(AlreadyDecided) as refused:
            decide()
        assert refused.value.code == "already_decided"
        assert people.approver.username in refused.value.detail
    effect.refresh_from_db()
    assert (effect.decision, effect.decided_by_id) == ("authorized", people.approver.id)
    entries = AuditEntry.objects.filter(object_id=str(effect.id))
    assert [(e.action, e.actor_name) for e in entries] == [
        ("effect.approve", people.approver.username)
    ]


def test_undecided_in_time_the_default_rejects_and_a_late_decision_is_refused(people, scene):
    effect = ask(scene, decide_within_ms=60_000)
    age_approval(effect.id, 61_000)
    report = sweep_run()
    assert report.steps["approvals"] == 1
    effect.refresh_from_db()
    assert (effect.decision, effect.refusal_code, effect.decided_by_id) == (
        "refused",
        "approval_expired",
        None,
    )
    assert AuditEntry.objects.get(action="effect.approval_expired").actor_role == "system"
    with pytest.raises(AlreadyDecided):
        approvals.effect_approve(effect_id=effect.id, actor=Actor.human(people.approver))
    # The agent asking again learns the refusal, not a fresh wait.
    with pytest.raises(ApprovalExpired):
        effect_under(scene.lease, scene.agent, "refund-1", payload=REFUND)


def test_a_decision_arriving_after_the_deadline_applies_the_default_before_any_sweep(people, scene):
    effect = ask(scene, decide_within_ms=60_000)
    age_approval(effect.id, 61_000)
    with pytest.raises(ApprovalExpired):
        approvals.effect_approve(effect_id=effect.id, actor=Actor.human(people.approver))
    effect.refresh_from_db()
    assert (effect.decision, effect.refusal_code) == ("refused", "approval_expired")
    assert not effect.fencing_token


def test_a_rule_may_default_to_approve_only_while_the_lease_could_propose_it(people, scene):
    effect = ask(scene, decide_within_ms=60_000, on_timeout="approve")
    assert approvals.effect_approver_reached(effect_id=effect.id)  # a notice reached one
    age_approval(effect.id, 61_000)
    sweep_run()
    effect.refresh_from_db()
    assert effect.decision == "authorized" and effect.decided_by_id is None
    claims = unverified_claims(effect.fencing_token)
    assert claims is not None and claims.digest == effect.content_digest

    # The same default, for a lease that ended meanwhile: refused with the lease's code.
    late = ask(scene, key="refund-2", decide_within_ms=60_000, on_timeout="approve")
    approvals.effect_approver_reached(effect_id=late.id)
    lease_release(lease_id=scene.lease.id, executor=scene.agent, epoch=scene.lease.epoch)
    age_approval(late.id, 61_000)
    sweep_run()
    late.refresh_from_db()
    assert (late.decision, late.refusal_code) == ("refused", "lease_released")


def test_no_approval_is_granted_for_an_ended_lease_nor_one_in_jeopardy(people, scene):
    approver = Actor.human(people.approver)
    shaky = ask(scene, key="refund-j")
    age_lease(scene.lease.id, 11_000)  # past jeopardy (2/3 of 15 s), not yet expired
    with pytest.raises(InJeopardy):
        approvals.effect_approve(effect_id=shaky.id, actor=approver)
    shaky.refresh_from_db()
    assert shaky.decision == "pending_approval"  # only unsure: it waits for a renewal

    lease_release(lease_id=scene.lease.id, executor=scene.agent, epoch=scene.lease.epoch)
    with pytest.raises(LeaseReleased):
        approvals.effect_approve(effect_id=shaky.id, actor=approver)
    shaky.refresh_from_db()
    assert (shaky.decision, shaky.refusal_code) == ("refused", "lease_released")
    assert not shaky.fencing_token
    assert AuditEntry.objects.filter(action="effect.approve_refused").count() == 1


def test_a_rule_that_does_not_ask_for_approval_has_no_decision_deadline():
    from leaseboard.domain.policy import RuleSetInvalid, rule_set_compiled

    with pytest.raises(RuleSetInvalid, match="decide_within_ms"):
        rule_set_compiled([RuleSpec(name="a", decision="allow", decide_within_ms=5000)], "allow")
    with pytest.raises(RuleSetInvalid, match="on_timeout"):
        rule_set_compiled(
            [RuleSpec(name="a", decision="require_approval", on_timeout="maybe")], "allow"
        )
