"""Issue 33's findings (hostile input and hostile configuration), replayed as they were
reported against the code before it. Each test here failed there: a rule's condition
running out of budget answered 500, a crafted token crashed the online check, a float the
database rewrites broke idempotency, a null checkpoint was a 500 and a list body a 201."""

from __future__ import annotations

import json

import pytest

from leaseboard.core.models import Checkpoint, Effect, Lease
from leaseboard.domain.policy import RuleSpec
from tests.api.effects import effect_propose
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
    return effect_propose(api, grant["token"], grant, key, kind=kind, payload=payload)


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


# -- 7. idempotency compares the payload as the database returns it --------------------------


@pytest.mark.parametrize(
    "payload",
    [{"amount": 1e16}, {"amount": 1e-5, "n": [1e22, 1.0]}, {"amount": 1e23}, {"x": -0.0}],
)
def test_finding_a_retry_with_a_float_the_database_rewrites_is_the_same_effect(api, grant, payload):
    """jsonb stores 1e16 as 10000000000000000: the identical retry answered 409
    idempotency_conflict."""
    first = propose(api, grant, "float-1", payload)
    assert first.status_code == 201, first.content
    again = propose(api, grant, "float-1", payload)
    assert again.status_code == 201, again.content
    assert again.json_body["effect_id"] == first.json_body["effect_id"]


def test_a_retry_with_another_number_or_type_is_still_a_conflict(api, grant):
    assert propose(api, grant, "float-2", {"amount": 1e16}).status_code == 201
    for changed in ({"amount": 1e16 + 2}, {"amount": "1e16"}, {"amount": True}):
        r = propose(api, grant, "float-2", changed)
        assert (r.status_code, r.json_body["code"]) == (409, "idempotency_conflict"), changed
    assert propose(api, grant, "bool-1", {"flag": True}).status_code == 201
    r = propose(api, grant, "bool-1", {"flag": 1})
    assert (r.status_code, r.json_body["code"]) == (409, "idempotency_conflict")


# -- 8. a null where a document is expected; a body that is not an object -----------------


def test_finding_a_null_checkpoint_is_a_validation_error_not_500(api, grant):
    r = api.post(
        f"/api/v1/leases/{grant['lease_id']}/checkpoints",
        {"data": None, "epoch": grant["epoch"]},
        grant["token"],
    )
    assert (r.status_code, r.json_body["code"]) == (400, "validation_error"), r.content
    assert not Checkpoint.objects.exists()


@pytest.mark.parametrize("raw", ["[null, null]", "[]", "null", "1", '"x"', "true"])
def test_finding_a_body_that_is_not_an_object_is_refused_everywhere(api, grant, raw):
    """`[null, null]` as an acquire's body answered 201."""
    _, token = grant["token"], grant["token"]
    assert api.post("/api/v1/work-items", {"key": "hostile-2"}, token).status_code == 201
    paths = [
        "/api/v1/work-items/hostile-2/lease",
        "/api/v1/work-items",
        f"/api/v1/leases/{grant['lease_id']}/renew",
        f"/api/v1/leases/{grant['lease_id']}/release",
        "/api/v1/effects",
        "/api/v1/policy/explain",
    ]
    for path in paths:
        r = api.post(path, token=token, raw=raw)
        assert r.status_code == 400, (path, r.content)
        assert r.json_body["code"] == "validation_error"
    assert not Lease.objects.filter(work_item__key="hostile-2").exists()


# -- found by the dashboard forms fuzz (tests/web/test_hostile_forms.py) -----------------------


def test_finding_an_agent_name_with_a_slash_no_longer_breaks_the_credentials_page(client):
    """An agent named `<script>alert(1)</script>` (a `/` in it) made every load of the
    credentials page a 500: its rotate and revoke URLs could not be reversed."""
    from leaseboard.core.models import Executor
    from leaseboard.core.services.executors import agent_create
    from leaseboard.domain.errors import ValidationFailed

    for name in ("<script>alert(1)</script>", "a/b", "line\nbreak", "nul\x00"):
        with pytest.raises(ValidationFailed):
            agent_create(name=name, all_queues=True, actor_name="cli:test")
    # One named before the check still gets its page and its actions.
    Executor.objects.create(name="legacy/agent", kind=Executor.Kind.AGENT, token_hash="x" * 64)
    client.force_login(make_user("ada-creds", "admin"))
    page = client.get("/settings/credentials/")
    assert page.status_code == 200
    assert b"/settings/credentials/legacy/agent/rotate" in page.content
    assert client.post("/settings/credentials/legacy/agent/rotate").status_code == 200
