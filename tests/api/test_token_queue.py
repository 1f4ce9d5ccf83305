"""Tokens name the queue and the policy version they were decided under (docs/design.md §9), so a
recipient can notice an effect decided in a queue it does not take that kind from: the
signed claims and the online check's answer (the sandbox payments recipient, which takes
payments only from the `payments` queue: tests/recipient/test_sandbox.py)."""

from __future__ import annotations

import pytest

from leaseboard.core.models import Queue
from leaseboard.domain.fencing import unverified_claims
from tests.api.effects import effect_propose
from tests.builders import effect_rules

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def effect(api, token, grant, key):  # type: ignore[no-untyped-def]
    r = effect_propose(api, token, grant, key, kind="payment.charge", target="sandbox:acme")
    assert r.status_code == 201, r.content
    return r.json_body


def test_effect_and_lease_tokens_name_the_queue_and_the_policy_version(api, agent):
    queue = Queue.objects.create(name="payments")
    effect_rules(queue, ("db.*", "deny"))
    queue.refresh_from_db()
    _, token = agent("claims", queues=["payments"])
    api.post("/api/v1/work-items", {"key": "t-1", "queue": "payments"}, token)
    grant = api.post("/api/v1/work-items/t-1/lease", {}, token).json_body
    lease_claims = unverified_claims(grant["fencing_token"])
    assert lease_claims.queue == "payments" and lease_claims.policy_version is None
    claims = unverified_claims(effect(api, token, grant, "c-1")["fencing_token"])
    assert (claims.queue, claims.policy_version) == ("payments", queue.policy_version)


def test_the_online_check_says_the_queue_and_refuses_another(api, agent, recipient):
    Queue.objects.create(name="payments")
    _, token = agent("online", queues=["default"])
    _, credential = recipient("payments-service")
    api.post("/api/v1/work-items", {"key": "t-2"}, token)
    grant = api.post("/api/v1/work-items/t-2/lease", {}, token).json_body
    fx = effect(api, token, grant, "c-2")
    check = {"fencing_token": fx["fencing_token"]}
    answer = api.post("/api/v1/fencing/check", check, credential).json_body
    assert answer["valid"] and answer["queue"] == "default"
    assert answer["policy_version"] == Queue.objects.get(name="default").policy_version
    only_payments = api.post("/api/v1/fencing/check", {**check, "queue": "payments"}, credential)
    assert only_payments.json_body["valid"] is False
    assert only_payments.json_body["code"] == "wrong_queue"
