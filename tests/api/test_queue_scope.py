"""An agent admits work only into the queues its credential may use (docs/design.md §9, "no
route around a rule"): the queue decides which commit-time rules bind the work, so an agent
must not escape a queue's approval rule by admitting the same work elsewhere. Acquiring in
another queue and proposing effects there are refused the same way (queue_not_allowed)."""

from __future__ import annotations

import pytest

from leaseboard.core.models import AuditEntry, Effect, Queue, WorkItem
from tests.builders import BIG_REFUNDS, effect_rules

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


@pytest.fixture
def payments(db):  # type: ignore[no-untyped-def]
    queue = Queue.objects.create(name="payments")
    effect_rules(queue, BIG_REFUNDS)
    return queue


def refund(api, token, grant, key, cents=900_000_000):  # type: ignore[no-untyped-def]
    body = {
        "lease_id": grant["lease_id"],
        "epoch": grant["epoch"],
        "kind": "payment.refund",
        "target": "order-1",
        "idempotency_key": key,
        "payload": {"amount_cents": cents},
    }
    return api.post("/api/v1/effects", body, token)


def test_an_agent_cannot_escape_an_approval_rule_by_admitting_to_another_queue(
    api, agent, payments
):
    """The reproduction: `payments` requires approval for refunds over 50,000; the agent
    admits pay-1-alt into `default` instead, acquires it, and a 9,000,000 refund was
    authorized with a fencing token. Its credential names `payments` only."""
    _, token = agent("pay-agent", queues=["payments"])
    api.post("/api/v1/work-items", {"key": "pay-1", "queue": "payments"}, token)
    grant = api.post("/api/v1/work-items/pay-1/lease", {}, token).json_body
    assert refund(api, token, grant, "r-1").status_code == 202  # the rule binds here

    r = api.post("/api/v1/work-items", {"key": "pay-1-alt", "queue": "default"}, token)
    assert r.status_code == 403, r.content
    assert r.json_body["code"] == "queue_not_allowed"
    assert r.json_body["queue"] == "default" and r.json_body["decision"] == "admission"
    assert not WorkItem.objects.filter(key="pay-1-alt").exists()
    assert not Effect.objects.filter(decision="authorized").exists()


def test_a_queue_the_credential_may_not_use_is_refused_before_it_is_looked_up(api, agent, payments):
    _, token = agent("pay-agent", queues=["payments"])
    unknown = api.post("/api/v1/work-items", {"key": "x-1", "queue": "no-such-queue"}, token)
    assert unknown.status_code == 403 and unknown.json_body["code"] == "queue_not_allowed"


def test_an_agent_acquires_only_in_its_queues(api, agent, payments):
    _, everywhere = agent("admitter")  # may use every queue (said explicitly)
    _, scoped = agent("pay-only", queues=["payments"])
    assert api.post("/api/v1/work-items", {"key": "d-1"}, everywhere).status_code == 201
    r = api.post("/api/v1/work-items/d-1/lease", {}, scoped)
    assert r.status_code == 403 and r.json_body["code"] == "queue_not_allowed"
    assert WorkItem.objects.get(key="d-1").epoch == 0
    assert api.post("/api/v1/work-items/d-1/lease", {}, everywhere).status_code == 201


def test_a_narrowed_credential_proposes_no_new_effect_but_winds_its_lease_down(
    api, agent, payments, settings
):
    from leaseboard.core.services.executors import agent_scope_change

    settings.LEASEBOARD_TOKEN_CACHE_SECONDS = 0
    executor, token = agent("narrowed", queues=["default", "payments"])
    api.post("/api/v1/work-items", {"key": "n-1"}, token)
    grant = api.post("/api/v1/work-items/n-1/lease", {}, token).json_body
    agent_scope_change(name=executor.name, queues=["payments"], actor_name="test")

    refused = refund(api, token, grant, "n-r1", cents=100)
    assert refused.status_code == 403 and refused.json_body["code"] == "queue_not_allowed"
    assert Effect.objects.get(idempotency_key="n-r1").refusal_code == "queue_not_allowed"
    lease = f"/api/v1/leases/{grant['lease_id']}"
    assert api.post(f"{lease}/renew", {"epoch": 1}, token).status_code == 200
    assert api.post(f"{lease}/checkpoints", {"epoch": 1, "data": {}}, token).status_code == 201
    assert api.post(f"{lease}/release", {"epoch": 1}, token).status_code == 200
    change = AuditEntry.objects.get(action="agent.scope_change")
    assert change.before["queues"] == ["default", "payments"]
    assert change.after["queues"] == ["payments"]


def test_the_sdk_raises_a_typed_error_for_a_queue_it_may_not_use(api, agent, payments):
    from leaseboard_client.errors import QueueNotAllowed, error_for

    _, token = agent("sdk", queues=["payments"])
    r = api.post("/api/v1/work-items", {"key": "s-1", "queue": "default"}, token)
    err = error_for(r.json_body["code"], status=r.status_code, problem=r.json_body)
    assert isinstance(err, QueueNotAllowed) and err.queue == "default"


def test_a_key_admitted_to_one_queue_is_a_conflict_in_another_naming_its_queue(
    api, agent, payments
):
    _, token = agent("both")
    assert (
        api.post("/api/v1/work-items", {"key": "k-1", "queue": "payments"}, token).status_code
        == 201
    )
    retry = api.post("/api/v1/work-items", {"key": "k-1", "queue": "payments"}, token)
    assert retry.status_code == 200
    other = api.post("/api/v1/work-items", {"key": "k-1", "queue": "default"}, token)
    assert other.status_code == 409, other.content
    assert other.json_body["code"] == "idempotency_conflict"
    assert other.json_body["queue"] == "payments"
