"""leaseboard.policy.services.rules: a rule whose condition names payload fields that the
recent effects of its kind did not carry is saved with a warning (on the rule form, in the
configuration plan), never refused."""

from __future__ import annotations

import pytest
from django.test import Client

from leaseboard.core.authority import Actor
from leaseboard.domain.policy import RuleSpec
from leaseboard.policy.services import queues
from leaseboard.policy.services.config import config_apply_text
from leaseboard.policy.services.rules import payload_field_warnings, payload_fields
from tests.builders import effect_under, leased_item, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


@pytest.mark.parametrize(
    ("when", "fields"),
    [
        ("payload.amount > 500", ["amount"]),
        ("has(payload.amount_cents) && payload.amount_cents > 1", ["amount_cents"]),
        ("payload['pay-ee'] == 'x' || payload[\"to\"] == 'y'", ["pay-ee", "to"]),
        ("size(payload) > 1 && effect.kind == 'payload.x'", []),
        ("work.scope.payload.x == 1", []),
    ],
)
def test_it_finds_the_top_level_payload_fields_a_condition_names(when, fields):
    assert payload_fields(when) == fields


@pytest.fixture
def refunds(agent):
    """The payments queue with three recent refunds carrying amount_cents and currency."""
    admin = Actor.human(make_user("ada", "admin"))
    queues.queue_create(name="payments", values={}, actor=admin)
    executor, _ = agent()
    for n in range(3):
        lease = leased_item(executor, f"refund-{n}", queue="payments")
        effect_under(
            lease,
            executor,
            f"k{n}",
            kind="payment.refund",
            target=f"order-{n}",
            payload={"amount_cents": 125_000, "currency": "USD"},
        )
    return admin


def test_a_field_no_recent_effect_of_the_kind_had_is_a_warning_with_the_near_name(refunds):
    rules = [
        RuleSpec("big", "payment.refund", when="payload.amount > 50000", decision="deny"),
        RuleSpec("ok", "payment.*", when="payload.amount_cents > 1", decision="deny"),
    ]
    warnings = payload_field_warnings(rules, "payments")
    assert list(warnings) == ["rules[0].when"]
    said = warnings["rules[0].when"]
    assert said.startswith("payload.amount: in none of the 3 recent payment.refund effects")
    assert "(their payloads have amount_cents, currency)" in said
    assert said.endswith("Did you mean payload.amount_cents?")


def test_no_warning_without_recent_effects_to_compare_with(refunds):
    rule = RuleSpec("c", "payment.charge", when="payload.amount > 1", decision="deny")
    assert payload_field_warnings([rule], "payments") == {}
    assert payload_field_warnings([rule], "ledger-sync") == {}


def test_the_configuration_plan_warns_and_still_applies(refunds):
    # deliberate: a policy file's text (data, alike in shape only).
    text = """
version = 1
[queues.payments]
default_decision = "allow"
[[queues.payments.rules]]
name = "big-refunds"
kind = "payment.refund"
when = "payload.amount > 50000"
decision = "require_approval"
"""
    applied = config_apply_text(text, actor=refunds)
    assert list(applied.plan.warnings) == ["queues.payments.rules[0].when"]
    assert "warning: queues.payments.rules[0].when: payload.amount: in none" in (
        applied.plan.text()
    )
    from leaseboard.core.models import EffectRule

    assert EffectRule.objects.get(name="big-refunds").condition == "payload.amount > 50000"


def test_the_rule_form_saves_with_a_warning_and_shows_it_when_opened_again(refunds):
    client = Client()
    client.force_login(make_user("bo", "admin"))
    form = {
        "name": "big-refunds",
        "kind": "payment.refund",
        "target": "*",
        "when": "payload.amount > 50000",
        "decision": "require_approval",
        "note": "",
    }
    saved = client.post("/settings/queues/payments/rules/new", form, follow=True)
    page = saved.content.decode()
    assert "Rule big-refunds, condition: payload.amount: in none of the 3 recent" in page
    again = client.get("/settings/queues/payments/rules/big-refunds/").content.decode()
    assert '<p class="field-warning" role="status" data-field="when"><b>Warning:</b> ' in again
    assert "Did you mean payload.amount_cents?" in again
