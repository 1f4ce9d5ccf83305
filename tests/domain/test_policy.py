"""Commit-time rules and admission envelopes, decided without a database."""

from __future__ import annotations

import importlib
from datetime import UTC, datetime

import pytest

from leaseboard.domain.envelopes import (
    EnvelopeInvalid,
    scope_refusal,
    scopes_checked,
    window_wait_ms,
    windows_checked,
)
from leaseboard.domain.errors import ValidationFailed
from leaseboard.domain.expressions import ExpressionError, activation, compile_condition
from leaseboard.domain.policy import RuleSetInvalid, RuleSpec, covers, decide, rule_set_compiled
from leaseboard.domain.reconciliation import KIND_MAX, TARGET_MAX, effect_names_checked

BIG = RuleSpec(
    "big-payments", "payment.*", when="payload.amount_cents > 50000", decision="require_approval"
)


def ruling(rules, kind="payment.refund", target="order-1", default="allow", **facts):
    rs = rule_set_compiled(rules, default)
    return decide(rs, kind=kind, target=target, activation=lambda: activation(facts), explain=True)


@pytest.mark.parametrize(
    ("amount", "decision", "rule"),
    [(60000, "require_approval", "big-payments"), (40000, "allow", None), (50000, "allow", None)],
)
def test_a_payment_above_the_limit_needs_an_approver(amount, decision, rule):
    r = ruling([BIG], payload={"amount_cents": amount})
    assert (r.decision, r.rule) == (decision, rule)


def test_the_first_matching_rule_decides_and_later_ones_are_not_reached():
    rules = [
        RuleSpec("prod-deploys", "deploy.*", "prod-*", decision="deny"),
        RuleSpec("deploys", "deploy.*", decision="require_approval"),
        RuleSpec("rest", "*", decision="allow"),
    ]
    r = ruling(rules, kind="deploy.apply", target="prod-eu")
    assert (r.decision, r.rule) == ("deny", "prod-deploys")
    assert [s.outcome for s in r.steps] == ["matched", "not reached", "not reached"]
    r = ruling(rules, kind="deploy.apply", target="staging")
    assert (r.decision, r.rule) == ("require_approval", "deploys")
    assert [s.outcome for s in r.steps][:2] == ["target differs", "matched"]


def test_no_match_falls_to_the_queue_default():
    r = ruling([BIG], kind="ledger.sync", default="deny")
    assert (r.decision, r.rule) == ("deny", None)
    assert "default" in r.reason


def test_an_undecidable_condition_fails_closed_under_its_rule():
    # The payload lacks the key: the require_approval rule decides...
    r = ruling([BIG], payload={})
    assert (r.decision, r.rule) == ("require_approval", "big-payments")
    assert "could not be decided" in r.steps[0].detail and r.steps[0].outcome == "failed closed"
    assert "amount_cents" in r.error
    # ...and an allowing rule asks for an approver instead of letting it through or
    # passing it on to the rules after it (issue 33).
    allow_small = RuleSpec("small", "payment.*", when="payload.amount_cents < 100")
    r = ruling([allow_small], payload={}, default="deny")
    assert (r.decision, r.rule) == ("require_approval", "small")
    deny_big = RuleSpec("big", "payment.*", when="payload.amount_cents > 100", decision="deny")
    r = ruling([deny_big], payload={"amount_cents": "lots"}, default="allow")
    assert (r.decision, r.rule) == ("deny", "big")


def test_evidence_a_fresh_checkpoint_for_deploys():
    rule = RuleSpec(
        "stale-deploy",
        "deploy.*",
        when="!evidence.has_checkpoint || evidence.checkpoint_age_s > 300",
        decision="deny",
    )
    fresh = {"evidence.has_checkpoint": True, "evidence.checkpoint_age_s": 30}
    old = {"evidence.has_checkpoint": True, "evidence.checkpoint_age_s": 900}
    assert ruling([rule], kind="deploy.apply", **fresh).decision == "allow"
    assert ruling([rule], kind="deploy.apply", **old).decision == "deny"


def test_time_of_day_in_a_named_zone():
    rule = RuleSpec("night", "*", when="now.getHours('Europe/Berlin') < 6", decision="deny")
    night = datetime(2026, 1, 5, 3, 0, tzinfo=UTC)  # 04:00 in Berlin
    day = datetime(2026, 1, 5, 11, 0, tzinfo=UTC)
    assert ruling([rule], now=night).decision == "deny"
    assert ruling([rule], now=day).decision == "allow"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("payload.amount_cents >", "line 1, column 23: the condition ends too early"),
        ("evidence.checkpoint_agee < 5", "unknown field 'evidence.checkpoint_agee'"),
        ("paylod.x == 1", "unknown field 'paylod.x'"),
        ("effect.kind + 1 > 0", r"`\+` cannot be applied to string and int"),
        ("payload.amount_cents", None),  # dyn: allowed, decided at run time
        ("1 + 1", "must be true or false"),
        ("x" * 1001, "at most 1000"),
    ],
)
def test_conditions_are_checked_when_saved(source, message):
    if message is None:
        compile_condition(source)
        return
    with pytest.raises(ExpressionError, match=message):
        compile_condition(source)


def test_every_problem_of_a_rule_set_names_its_rule_and_field():
    with pytest.raises(RuleSetInvalid) as caught:
        rule_set_compiled(
            [
                RuleSpec("Bad Name", "payment.*"),
                RuleSpec("ok", "", when="payload.x >", decision="maybe"),
                RuleSpec("ok", "x" * 101),
            ],
            "allow",
        )
    found = {(p.index, p.field) for p in caught.value.problems}
    assert found == {
        (0, "name"),
        (1, "kind"),
        (1, "when"),
        (1, "decision"),
        (2, "name"),
        (2, "kind"),
    }


def test_a_rule_behind_an_unconditional_wider_rule_matches_nothing():
    with pytest.raises(RuleSetInvalid, match="matches nothing: rule 'all-payments'"):
        rule_set_compiled(
            [RuleSpec("all-payments", "payment.*"), RuleSpec("refunds", "payment.refund")],
            "allow",
        )
    # A condition on the earlier rule lets effects through to the later one: fine.
    rule_set_compiled([BIG, RuleSpec("refunds", "payment.refund", decision="deny")], "allow")


# deliberate: a table of cases, one row a case (data, alike in shape only).
@pytest.mark.parametrize(
    ("wide", "narrow", "covered"),
    [
        ("*", "payment.*", True),
        ("payment.*", "payment.refund", True),
        ("payment.*", "payment.re*", True),
        ("payment.refund", "payment.*", False),
        ("pay?ent.*", "payment.x", True),
        ("*.refund", "payment.*", False),
    ],
)
def test_glob_cover(wide, narrow, covered):
    assert covers(wide, narrow) is covered


def test_scopes_a_queue_admits():
    admits = scopes_checked({"env": ["staging", "prod-*"]})
    assert scope_refusal(admits, {"env": "prod-eu"}) is None
    assert "outside" in scope_refusal(admits, {"env": "dev"})
    assert "has 'env'" in scope_refusal(admits, {})
    with pytest.raises(EnvelopeInvalid, match="scopes.env"):
        scopes_checked({"env": []})


def test_time_windows():
    windows = windows_checked(
        {"tz": "UTC", "open": [{"days": "mon-fri", "from": "09:00", "to": "17:00"}]}
    )
    monday_10 = int(datetime(2026, 1, 5, 10, 0, tzinfo=UTC).timestamp() * 1000)
    monday_8 = int(datetime(2026, 1, 5, 8, 0, tzinfo=UTC).timestamp() * 1000)
    saturday_12 = int(datetime(2026, 1, 10, 12, 0, tzinfo=UTC).timestamp() * 1000)
    assert window_wait_ms(windows, monday_10) == 0
    assert window_wait_ms(windows, monday_8) == 3600_000
    assert window_wait_ms(windows, saturday_12) == (36 + 9) * 3600_000
    night = windows_checked({"open": [{"days": "daily", "from": "22:00", "to": "06:00"}]})
    assert window_wait_ms(night, monday_8 - 5 * 3600_000) == 0  # 03:00, the night before's


@pytest.mark.parametrize(
    ("raw", "param"),
    [
        ({"tz": "Mars/Base"}, "windows.tz"),
        ({"open": []}, "windows.open"),
        ({"open": [{"days": "funday", "from": "09:00", "to": "10:00"}]}, "windows.open[0].days"),
        ({"open": [{"days": "mon", "from": "9", "to": "10:00"}]}, "windows.open[0].from"),
        ({"open": [{"days": "mon", "from": "10:00", "to": "10:00"}]}, "windows.open[0].to"),
    ],
)
def test_bad_windows_name_their_field(raw, param):
    with pytest.raises(EnvelopeInvalid) as caught:
        windows_checked(raw)
    assert caught.value.param == param


def test_the_kind_only_policies_convert_to_rules_that_decide_the_same():
    migration = importlib.import_module(
        "leaseboard.core.migrations.0006_policy_rules_and_envelopes"
    )
    old = {"*": "allow", "payment.*": "require_approval", "payment.refund": "deny"}
    ordered = sorted((k for k in old if k != "*"), key=migration._specificity)
    rules = [RuleSpec(migration._rule_name(k, set()), k, decision=old[k]) for k in ordered]
    expected = {"payment.refund": "deny", "payment.charge": "require_approval", "x.y": "allow"}
    for kind, decision in expected.items():
        assert ruling(rules, kind=kind, default=old["*"]).decision == decision


@pytest.mark.parametrize(
    ("kind", "target", "param"),
    [
        ("", "order-1", "kind"),
        ("k" * (KIND_MAX + 1), "order-1", "kind"),
        ("payment.refund", "", "target"),
        ("payment.refund", "t" * (TARGET_MAX + 1), "target"),
    ],
)
def test_an_effects_kind_and_target_fit_its_fields(kind, target, param):
    effect_names_checked("k" * KIND_MAX, "t" * TARGET_MAX)  # at the bounds: accepted
    with pytest.raises(ValidationFailed) as refused:
        effect_names_checked(kind, target)
    assert refused.value.extra == {"param": param} and "characters" in refused.value.detail
