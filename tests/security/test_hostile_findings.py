"""Issue 33's findings (hostile input and hostile configuration), replayed as they were
reported against the code before it. Each test here failed there: a rule's condition
running out of budget answered 500, a crafted token crashed the online check, a float the
database rewrites broke idempotency, a null checkpoint was a 500 and a list body a 201."""

from __future__ import annotations

import json

import pytest

from leaseboard.core.models import Effect
from leaseboard.domain.policy import RuleSpec
from tests.api.schema_check import CheckedApiClient
from tests.builders import effect_rules, make_user

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

ITEMS_RULE = "has(payload.items) && payload.items.exists(i, i > 50000)"


@pytest.fixture
def api(client):  # type: ignore[no-untyped-def]
    return CheckedApiClient(client)


@pytest.fixture
def grant(api, agent):  # type: ignore[no-untyped-def]
    _, token = agent("hostile")
    assert api.post("/api/v1/work-items", {"key": "hostile-1"}, token).status_code == 201
    r = api.post("/api/v1/work-items/hostile-1/lease", {}, token)
    assert r.status_code == 201, r.content
    return {"token": token, **r.json_body}


def propose(api, grant, key: str, payload, kind: str = "payment.refund"):  # type: ignore[no-untyped-def]
    body = {
        "lease_id": grant["lease_id"],
        "epoch": grant["epoch"],
        "kind": kind,
        "target": "order-1",
        "idempotency_key": key,
        "payload": payload,
    }
    return api.post("/api/v1/effects", body, grant["token"])


# -- 1. a rule's condition that cannot be evaluated fails closed -----------------------------


@pytest.mark.parametrize(
    ("decision", "status", "answer"),
    [("allow", 202, "pending_approval"), ("deny", 403, "policy_denied")],
)
def test_finding_a_condition_out_of_budget_fails_closed_not_500(
    api, grant, decision, status, answer
):
    """12,000 items (~24 KB): cel-expr-python's iteration budget raised RuntimeError through
    `POST /effects` (500 text/html, nothing recorded, the retry too)."""
    effect_rules("default", RuleSpec("items", "payment.*", when=ITEMS_RULE, decision=decision))
    items = list(range(12_000))
    for _ in range(2):  # the retry answers the same, from the record
        r = propose(api, grant, "budget-1", {"items": items})
        assert r.status_code == status, r.content
        got = r.json_body.get("decision") if status == 202 else r.json_body["code"]
        assert got == answer
    effect = Effect.objects.get(idempotency_key="budget-1")
    assert effect.rule_name == "items"
    assert "10000" in effect.rule_error or "entries" in effect.rule_error
    if decision == "allow":
        assert effect.on_timeout == "reject"  # failing closed never defaults to approve
    else:
        assert "failed closed" in effect.refusal_detail


def test_finding_the_runtime_budget_itself_fails_closed(api, grant):
    """Within the item limit, a nested comprehension still exceeds CEL's own budget."""
    nested = "payload.items.all(i, payload.items.all(j, i >= 0))"
    effect_rules("default", RuleSpec("nested", "payment.*", when=nested, decision="allow"))
    r = propose(api, grant, "budget-2", {"items": list(range(200))})
    assert r.status_code == 202, r.content
    assert "budget" in Effect.objects.get(idempotency_key="budget-2").rule_error


@pytest.mark.parametrize(
    ("condition", "payload", "error"),
    [
        ("payload.amount + 1 > 0", {"amount": 2**63 - 1}, "overflow"),
        ("payload.amount > 0", {}, "amount"),  # a missing field, on an allowing rule
        ("payload.amount > 0", {"amount": "ten"}, "overloads"),
        ("int(payload.amount) > 0", {"amount": 1e300}, "range"),
    ],
)
def test_every_evaluation_error_of_an_allowing_rule_asks_for_an_approver(
    api, grant, condition, payload, error
):
    effect_rules(
        "default", RuleSpec("small", "payment.*", when=condition, decision="allow"), default="allow"
    )
    r = propose(api, grant, f"err-{error}", payload)
    assert r.status_code == 202, r.content
    assert error in Effect.objects.get(idempotency_key=f"err-{error}").rule_error


def test_finding_explain_answers_the_budget_error_instead_of_500(api, grant, client):
    effect_rules("default", RuleSpec("items", "payment.*", when=ITEMS_RULE, decision="deny"))
    body = {
        "queue": "default",
        "kind": "payment.refund",
        "target": "order-1",
        "payload": {"items": list(range(12_000))},
    }
    r = api.post("/api/v1/policy/explain", body, grant["token"])
    assert r.status_code == 200, r.content
    assert (r.json_body["decision"], r.json_body["rule"]) == ("deny", "items")
    assert r.json_body["error"]
    assert r.json_body["steps"][0]["outcome"] == "failed closed"
    # The explain page says so too.
    client.force_login(make_user("ada-explains", "admin"))
    page = client.post(
        "/settings/explain",
        {
            "queue": "default",
            "kind": "payment.refund",
            "target": "o",
            "payload": json.dumps(body["payload"]),
        },
    )
    assert page.status_code == 200
    assert b'id="failed-closed"' in page.content and b"failed closed" in page.content


def test_a_payload_nested_past_the_limit_fails_closed(api, grant, settings):
    settings.LEASEBOARD_RULE_MAX_DEPTH = 4
    effect_rules("default", RuleSpec("deep", "payment.*", when="has(payload.a)", decision="allow"))
    r = propose(api, grant, "deep-1", {"a": [[[[[1]]]]]})
    assert r.status_code == 202, r.content
    assert "nested deeper than 4" in Effect.objects.get(idempotency_key="deep-1").rule_error


def test_the_explain_page_refuses_json_nested_past_the_parser(client):
    client.force_login(make_user("ada-deep", "admin"))
    page = client.post(
        "/settings/explain",
        {"queue": "default", "kind": "k", "target": "t", "payload": "[" * 100_000},
    )
    assert page.status_code == 200
    assert b"not JSON" in page.content
