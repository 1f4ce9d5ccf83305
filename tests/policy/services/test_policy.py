"""Queues, admission envelopes, commit-time rules and four-eyes through the services, on
real PostgreSQL: who may change what, what each refusal names, what the audit keeps."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry, Effect, EffectRule, Queue
from leaseboard.core.services.leases import lease_acquire, lease_checkpoint
from leaseboard.core.services.policy import policy_explain
from leaseboard.core.services.work import work_admit
from leaseboard.domain.errors import (
    CapacityExhausted,
    Forbidden,
    PolicyDenied,
    TakeoverConflict,
    ValidationFailed,
    WorkNotAdmitted,
)
from leaseboard.domain.policy import RuleSpec
from leaseboard.policy.services import changes, credentials, people, queues, rules
from leaseboard.policy.services.common import SettingsInvalid
from tests.builders import age_lease, effect_under, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]

BIG = RuleSpec(
    "big-payments", "payment.*", when="payload.amount_cents > 50000", decision="require_approval"
)


@pytest.fixture
def admin():
    return Actor.human(make_user("ada-admin", "admin"))


@pytest.fixture
def second_admin():
    return Actor.human(make_user("bo-admin", "admin"))


def _queue(admin, name="payments", **values):
    return queues.queue_create(name=name, values=values, actor=admin)


def _propose(executor, lease, key, amount=None, kind="payment.refund", target="order-1"):
    return effect_under(
        lease,
        executor,
        key,
        kind=kind,
        target=target,
        payload={} if amount is None else {"amount_cents": amount},
    )


def test_an_admin_configures_and_the_effect_names_the_rule_that_decided(admin, agent):
    _queue(admin, capacity=2)
    change = rules.rule_set_change(
        queue_name="payments",
        rules=[BIG, RuleSpec("no-prod-deletes", "*.delete", "prod-*", decision="deny")],
        default="allow",
        actor=admin,
    )
    assert change.applied and change.version == 1
    bot, _ = agent("pay-bot")
    work_admit(key="p-1", queue_name="payments", by=None)
    lease = lease_acquire(work_key="p-1", executor=bot).lease
    big = _propose(bot, lease, "e1", 60000)
    small = _propose(bot, lease, "e2", 40000)
    assert (big.decision, big.rule_name, big.policy_version) == (
        "pending_approval",
        "big-payments",
        1,
    )
    assert (small.decision, small.rule_name) == ("authorized", "")
    with pytest.raises(PolicyDenied) as caught:
        _propose(bot, lease, "e3", kind="db.delete", target="prod-users")
    assert caught.value.extra["rule"] == "no-prod-deletes"
    assert "no-prod-deletes" in caught.value.detail
    refused = Effect.objects.get(idempotency_key="e3")
    assert (refused.refusal_code, refused.rule_name) == ("policy_denied", "no-prod-deletes")


def test_evidence_a_checkpoint_younger_than_five_minutes(admin, agent):
    _queue(admin, name="deploys")
    fresh = RuleSpec(
        "need-fresh-checkpoint",
        "deploy.*",
        when="!evidence.has_checkpoint || evidence.checkpoint_age_s > 300",
        decision="deny",
    )
    rules.rule_set_change(queue_name="deploys", rules=[fresh], default="allow", actor=admin)
    bot, _ = agent()
    work_admit(key="d-1", queue_name="deploys", by=None)
    lease = lease_acquire(work_key="d-1", executor=bot).lease
    with pytest.raises(PolicyDenied):
        _propose(bot, lease, "d1", kind="deploy.apply", target="prod")
    lease_checkpoint(lease_id=lease.id, executor=bot, epoch=lease.epoch, data={"step": 3})
    assert _propose(bot, lease, "d2", kind="deploy.apply", target="prod").decision == "authorized"
    explained = policy_explain(kind="deploy.apply", target="prod", work_key="d-1")
    assert explained.ruling.decision == "allow"
    assert explained.facts["evidence.has_checkpoint"] is True


def test_explain_walks_the_rules_in_order(admin):
    _queue(admin)
    rules.rule_set_change(queue_name="payments", rules=[BIG], default="deny", actor=admin)
    e = policy_explain(
        queue_name="payments", kind="payment.refund", target="o", payload={"amount_cents": 9}
    )
    assert (e.ruling.decision, e.ruling.rule) == ("deny", None)
    assert [(s.rule, s.outcome) for s in e.ruling.steps] == [("big-payments", "condition false")]
    e = policy_explain(
        queue_name="payments", kind="payment.refund", target="o", payload={"amount_cents": 60001}
    )
    assert e.ruling.rule == "big-payments" and "payload.amount_cents > 50000" in e.ruling.reason


def test_only_an_admin_changes_configuration_and_an_admin_approves_no_effect(agent):
    operator = Actor.human(make_user("olga", "operator"))
    approver = Actor.human(make_user("abe", "approver"))
    for actor in (operator, approver):
        with pytest.raises(Forbidden):
            queues.queue_create(name="q", values={}, actor=actor)
        with pytest.raises(Forbidden):
            rules.rule_set_change(queue_name="default", rules=[], default="deny", actor=actor)
        with pytest.raises(Forbidden):
            credentials.credential_create(name="x", actor=actor)
    assert not Queue.objects.filter(name="q").exists()
    from leaseboard.core.services.approvals import effect_approve

    admin = Actor.human(make_user("ada2", "admin"))
    rules.rule_set_change(queue_name="default", rules=[], default="require_approval", actor=admin)
    bot, _ = agent()
    work_admit(key="w-1", by=None)
    lease = lease_acquire(work_key="w-1", executor=bot).lease
    pending = _propose(bot, lease, "k1")
    with pytest.raises(Forbidden):
        effect_approve(effect_id=pending.id, actor=admin)


def test_every_change_is_audited_before_and_after_and_a_repeat_records_nothing(admin):
    _queue(admin, capacity=2)
    queues.queue_update(name="payments", values={"capacity": 3}, actor=admin)
    _, changed = queues.queue_update(name="payments", values={"capacity": 3}, actor=admin)
    assert not changed
    rules.rule_set_change(queue_name="payments", rules=[BIG], default="allow", actor=admin)
    again = rules.rule_set_change(queue_name="payments", rules=[BIG], default="allow", actor=admin)
    assert not again.changed
    entries = list(AuditEntry.objects.order_by("seq").values("action", "before", "after"))
    assert [e["action"] for e in entries] == ["queue.create", "queue.update", "policy.rules_change"]
    assert (entries[1]["before"]["capacity"], entries[1]["after"]["capacity"]) == (2, 3)
    assert entries[2]["before"]["rules"] == []
    assert entries[2]["after"]["rules"][0]["when"] == "payload.amount_cents > 50000"
    assert AuditEntry.objects.filter(actor_role="admin", actor_name="ada-admin").count() == 3


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"timing": {"ttl_ms": 3000, "renew_after_ms": 2000}}, "timing.ttl_ms"),
        ({"timing": {"ttl_ms": 9000, "jeopardy_after_ms": 9000}}, "timing.jeopardy_after_ms"),
        ({"timing": {"ttl_msec": 9000}}, "timing.ttl_msec"),
        ({"capacity": -1}, "capacity"),
        ({"overflow": "drop"}, "overflow"),
        ({"colour": "red"}, "colour"),
        ({"scopes": {"env": []}}, "scopes.env"),
        ({"windows": {"tz": "Nowhere/City", "open": []}}, "windows.tz"),
        ({"leases_per_agent": 0.5}, "leases_per_agent"),
    ],
)
def test_bad_queue_settings_are_field_errors_and_nothing_is_saved(admin, values, field):
    with pytest.raises(SettingsInvalid) as caught:
        _queue(admin, **values)
    assert field in caught.value.errors
    assert not Queue.objects.filter(name="payments").exists()
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        (RuleSpec("r", "payment.*", when="payload.amount_cents >"), "rules[0].when"),
        (RuleSpec("r", "payment.*", when="evidence.age < 3"), "rules[0].when"),
        (RuleSpec("r", "x" * 101), "rules[0].kind"),
        (RuleSpec("R 1", "payment.*"), "rules[0].name"),
    ],
)
def test_bad_rules_are_field_errors_and_nothing_is_saved(admin, rule, field):
    _queue(admin)
    before = AuditEntry.objects.count()
    with pytest.raises(SettingsInvalid) as caught:
        rules.rule_set_change(queue_name="payments", rules=[rule], default="allow", actor=admin)
    assert field in caught.value.errors
    assert not EffectRule.objects.exists()
    assert Queue.objects.get(name="payments").policy_version == 0
    assert AuditEntry.objects.count() == before


def test_four_eyes_a_rule_change_waits_for_a_second_admin(admin, second_admin, settings, agent):
    settings.LEASEBOARD_POLICY_FOUR_EYES = True
    _queue(admin)
    change = rules.rule_set_change(
        queue_name="payments", rules=[BIG], default="allow", actor=admin, summary="big ones"
    )
    assert change.changed and not change.applied
    assert not EffectRule.objects.exists()
    with pytest.raises(ValidationFailed, match="waits for a second admin"):
        rules.rule_set_change(queue_name="payments", rules=[], default="deny", actor=admin)
    with pytest.raises(Forbidden):
        changes.change_approve(change_id=change.proposal.pk, actor=admin)
    changes.change_approve(change_id=change.proposal.pk, actor=second_admin, note="ok")
    assert list(EffectRule.objects.values_list("name", flat=True)) == ["big-payments"]
    assert Queue.objects.get(name="payments").policy_version == 1
    actions = list(AuditEntry.objects.order_by("seq").values_list("action", flat=True))
    assert actions[-2:] == ["policy.change_proposed", "policy.change_approved"]


def test_four_eyes_a_proposal_the_rules_moved_on_from_is_refused(admin, second_admin, settings):
    settings.LEASEBOARD_POLICY_FOUR_EYES = True
    _queue(admin)
    proposed = rules.rule_set_change(
        queue_name="payments", rules=[BIG], default="allow", actor=admin
    )
    # The rules change behind the proposal (with four-eyes turned off for a moment).
    settings.LEASEBOARD_POLICY_FOUR_EYES = False
    rules.rule_set_change(queue_name="payments", rules=[], default="deny", actor=second_admin)
    with pytest.raises(TakeoverConflict, match="changed since"):
        changes.change_approve(change_id=proposed.proposal.pk, actor=second_admin)
    changes.change_reject(change_id=proposed.proposal.pk, actor=admin)
    proposed.proposal.refresh_from_db()
    assert proposed.proposal.status == "withdrawn"


def test_admission_envelope_scopes(admin):
    _queue(admin, scopes={"env": ["staging", "prod-*"]})
    item, _ = work_admit(key="s-1", queue_name="payments", scope={"env": "prod-eu"}, by=None)
    assert item.admission == "admitted"
    with pytest.raises(WorkNotAdmitted) as caught:
        work_admit(key="s-2", queue_name="payments", scope={"env": "dev"}, by=None)
    assert caught.value.extra["limit"] == "scope"


def test_admission_envelope_leases_per_agent(admin, agent):
    _queue(admin, leases_per_agent=2)
    bot, _ = agent()
    for i in range(3):
        work_admit(key=f"l-{i}", queue_name="payments", by=None)
    lease_acquire(work_key="l-0", executor=bot)
    second = lease_acquire(work_key="l-1", executor=bot).lease
    with pytest.raises(CapacityExhausted) as caught:
        lease_acquire(work_key="l-2", executor=bot)
    assert caught.value.extra["limit"] == "leases_per_agent"
    # An expired lease holds no place, whether or not a sweep has marked it.
    age_lease(second.id, second.ttl_ms + 1000)
    assert lease_acquire(work_key="l-2", executor=bot).lease.epoch == 1
    other, _ = agent()
    work_admit(key="l-3", queue_name="payments", by=None)
    lease_acquire(work_key="l-3", executor=other)  # the limit is per agent


def test_admission_envelope_time_windows(admin, agent, db_clock):
    # A window that is never open now: the next day at this hour, for one minute... or
    # simply a window on a weekday other than today's (UTC).
    from datetime import UTC, datetime

    from leaseboard.core.clock import db_now_ms
    from leaseboard.domain.envelopes import DAYS

    today = datetime.fromtimestamp(db_now_ms() / 1000, UTC).weekday()
    other_day = DAYS[(today + 2) % 7]
    _queue(admin, windows={"open": [{"days": other_day, "from": "00:00", "to": "24:00"}]})
    bot, _ = agent()
    work_admit(key="t-1", queue_name="payments", by=None)
    with pytest.raises(WorkNotAdmitted) as caught:
        lease_acquire(work_key="t-1", executor=bot)
    assert caught.value.extra["limit"] == "window"
    assert 0 < caught.value.extra["retry_after_ms"] <= 2 * 24 * 3600_000
    db_clock.advance(caught.value.extra["retry_after_ms"])
    assert lease_acquire(work_key="t-1", executor=bot).lease.epoch == 1


def test_raising_capacity_admits_what_waits(admin):
    _queue(admin, capacity=1)
    work_admit(key="c-1", queue_name="payments", by=None)
    waiting, _ = work_admit(key="c-2", queue_name="payments", by=None)
    assert waiting.admission == "waiting"
    queues.queue_update(name="payments", values={"capacity": 2}, actor=admin)
    waiting.refresh_from_db()
    assert waiting.admission == "admitted"


def test_people_roles_break_glass_and_the_last_admin(admin):
    created = people.person_create(username="nina", roles=["operator"], actor=admin)
    assert not created.user.has_usable_password() and "/account/set-password/" in created.link
    people.person_update(
        username="nina", roles=["operator", "approver"], break_glass=True, actor=admin
    )
    nina = Actor.human(created.user)
    assert nina.break_glass and {r.value for r in nina.roles} == {"operator", "approver"}
    # The last admin cannot lose the role: nobody changes their own roles, and whoever
    # else is an admin is not the last.
    with pytest.raises(Forbidden, match="never themselves"):
        people.person_update(
            username="ada-admin", roles=["operator"], break_glass=False, actor=admin
        )
    entry = AuditEntry.objects.filter(action="user.update").get()
    assert entry.before["roles"] == ["operator"] and entry.after["break_glass"] is True


def test_a_rotated_credential_refuses_the_old_token(admin, api, settings):
    settings.LEASEBOARD_TOKEN_CACHE_SECONDS = 0  # (the cache is forgotten on commit)
    executor, token = credentials.credential_create(name="q-bot", queues=["default"], actor=admin)
    assert api.get("/api/v1/work-items/none", token).status_code == 404
    _, new = credentials.credential_rotate(name="q-bot", actor=admin)
    assert api.get("/api/v1/work-items/none", token).status_code == 401
    assert api.get("/api/v1/work-items/none", new).status_code == 404


def test_webhook_secrets_are_kept_and_never_audited(admin):
    _queue(admin)
    hook = {"url": "https://hooks.example.com/lb", "secret": "s3cret-value"}
    queues.queue_notify_update(name="payments", notify={"webhooks": [hook]}, actor=admin)
    # The same URL without a secret (as a form or a config file gives it) keeps it.
    queues.queue_notify_update(
        name="payments",
        notify={"webhooks": [{"url": hook["url"]}], "emails": ["ops@example.com"]},
        actor=admin,
    )
    queue = Queue.objects.get(name="payments")
    assert queue.notify["webhooks"][0]["secret"] == "s3cret-value"
    assert "s3cret" not in str(list(AuditEntry.objects.values_list("before", "after")))
    with pytest.raises(SettingsInvalid) as caught:
        queues.queue_notify_update(
            name="payments", notify={"webhooks": [{"url": "ftp://x"}]}, actor=admin
        )
    assert "webhooks[0].url" in caught.value.errors
