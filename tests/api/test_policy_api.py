"""The API's side of policy: a pending approval and a refusal name the rule that decided;
an admission refusal names the limit; agents can ask which rule would decide."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.domain.policy import RuleSpec
from leaseboard.policy.services import queues, rules
from tests.builders import make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


@pytest.fixture
def payments():
    admin = Actor.human(make_user("ada", "admin"))
    queues.queue_create(name="payments", values={"capacity": 2}, actor=admin)
    big = RuleSpec(
        "big-payments",
        "payment.*",
        when="payload.amount_cents > 50000",
        decision="require_approval",
    )
    wipe = RuleSpec("no-wipes", "db.wipe", decision="deny")
    rules.rule_set_change(queue_name="payments", rules=[big, wipe], default="allow", actor=admin)
    return admin


def _effect(api, token, lease, key, kind="payment.refund", **payload):  # type: ignore[no-untyped-def]
    body = {
        "lease_id": lease["lease_id"],
        "epoch": lease["epoch"],
        "kind": kind,
        "target": "order-1",
        "idempotency_key": key,
        "payload": payload,
    }
    return api.post("/api/v1/effects", body, token)


def test_effects_are_decided_by_the_rules_and_name_the_rule(api, agent, payments):
    _, token = agent()
    assert (
        api.post("/api/v1/work-items", {"key": "p1", "queue": "payments"}, token).status_code == 201
    )
    lease = api.post("/api/v1/work-items/p1/lease", {}, token).json_body
    waiting = _effect(api, token, lease, "e1", amount_cents=60000)
    assert waiting.status_code == 202
    assert waiting.json_body["decision"] == "pending_approval"
    assert waiting.json_body["rule"] == "big-payments"
    ok = _effect(api, token, lease, "e2", amount_cents=40000)
    assert ok.status_code == 201 and ok.json_body["fencing_token"]
    denied = _effect(api, token, lease, "e3", kind="db.wipe")
    assert denied.status_code == 403
    assert (denied.json_body["code"], denied.json_body["rule"]) == ("policy_denied", "no-wipes")
    again = _effect(api, token, lease, "e3", kind="db.wipe")  # a retry answers the same
    assert (again.status_code, again.json_body["rule"]) == (403, "no-wipes")


def test_the_third_admission_waits_at_capacity_two(api, agent, payments):
    _, token = agent()
    answers = [
        api.post("/api/v1/work-items", {"key": f"c{i}", "queue": "payments"}, token).json_body
        for i in range(3)
    ]
    assert [a["admission"] for a in answers] == ["admitted", "admitted", "waiting"]


def test_admission_refusals_name_the_limit(api, agent, payments):
    queues.queue_update(
        name="payments",
        values={"capacity": 2, "scopes": {"env": ["prod"]}, "leases_per_agent": 1},
        actor=payments,
    )
    _, token = agent()
    r = api.post(
        "/api/v1/work-items", {"key": "s1", "queue": "payments", "scope": {"env": "dev"}}, token
    )
    assert r.status_code == 409
    assert (r.json_body["code"], r.json_body["limit"]) == ("work_not_admitted", "scope")
    for key in ("s2", "s3"):
        body = {"key": key, "queue": "payments", "scope": {"env": "prod"}}
        assert api.post("/api/v1/work-items", body, token).status_code == 201
    assert api.post("/api/v1/work-items/s2/lease", {}, token).status_code == 201
    r = api.post("/api/v1/work-items/s3/lease", {}, token)
    assert r.status_code == 409
    assert (r.json_body["code"], r.json_body["limit"]) == ("capacity_exhausted", "leases_per_agent")


def test_an_agent_asks_which_rule_would_decide(api, agent, payments):
    _, token = agent()
    body = {
        "queue": "payments",
        "kind": "payment.refund",
        "target": "o",
        "payload": {"amount_cents": 60001},
    }
    r = api.post("/api/v1/policy/explain", body, token)
    assert r.status_code == 200, r.json_body
    assert (r.json_body["decision"], r.json_body["rule"]) == ("require_approval", "big-payments")
    assert r.json_body["steps"][0] == {
        "rule": "big-payments",
        "outcome": "matched",
        "detail": "payload.amount_cents > 50000 is true",
    }
    r = api.post("/api/v1/policy/explain", {**body, "payload": {"amount_cents": 1}}, token)
    assert (r.json_body["decision"], r.json_body["rule"]) == ("allow", None)
    assert api.post("/api/v1/policy/explain", {**body, "queue": "nope"}, token).status_code == 404
    assert api.post("/api/v1/policy/explain", body).status_code == 401
    assert "/api/v1/policy/explain" in api.get("/api/v1/openapi.json").json_body["paths"]
