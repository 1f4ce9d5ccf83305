"""Approvals bind to what executes: an approver authorizes a refund of 100.00 on the
decision page; the agent then sends 900.00 to the recipient with the approved token. Both
recipient guards (the leaseboard_recipient verifier and the server's online check) refuse
it as payload_mismatch, both refusals are recorded, and the work item page shows them."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from leaseboard.core.models import AuditEntry, Effect, Queue
from leaseboard_recipient import (
    EffectContent,
    InMemoryEpochGuard,
    Refusal,
    TokenVerifier,
    content_digest,
)
from leaseboard_recipient.tokens import public_keys_from_jwks, unverified_claims
from tests.api.effects import effect_propose
from tests.builders import effect_rules, make_user

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

APPROVED = {"amount": "100.00", "currency": "EUR", "order": "order-1"}
STRETCHED = {**APPROVED, "amount": "900.00"}


class ApiReporter:
    """The recipient's report path, through the real endpoint with its own credential."""

    def __init__(self, api: Any, credential: str) -> None:
        self.api, self.credential = api, credential

    def report(self, refusal: Refusal) -> None:
        r = self.api.post("/api/v1/recipient-reports", refusal.body(), self.credential)
        assert r.status_code == 201, r.content


def propose(api: Any, token: str, grant: dict[str, Any], payload: dict[str, Any]) -> Any:
    return effect_propose(api, token, grant, "refund-1", payload=payload)


@pytest.fixture
def approved(api, holder):  # type: ignore[no-untyped-def]
    """The refund of 100.00, approved on its decision page: (agent token, effect token)."""
    effect_rules(Queue.objects.get(name="default"), ("payment.*", "require_approval"))
    agent_token, grant = holder
    waiting = propose(api, agent_token, grant, APPROVED)
    assert waiting.status_code == 202 and waiting.json_body["decision"] == "pending_approval"
    effect_id = waiting.json_body["effect_id"]

    approver = Client()
    approver.force_login(make_user("abe-pay", "approver"))
    page = approver.get(f"/takeovers/effects/{effect_id}")
    assert page.status_code == 200
    digest = content_digest("payment.refund", "order-1", APPROVED)
    html = page.content.decode()
    assert digest in html and "100.00" in html and "900.00" not in html
    assert f'name="digest" value="{digest}"' in html
    decided = approver.post(
        f"/takeovers/effects/{effect_id}/approve", {"digest": digest, "back": "effect"}
    )
    assert decided.status_code == 302

    again = propose(api, agent_token, grant, APPROVED)  # the same key learns the decision
    assert again.status_code == 201 and again.json_body["decision"] == "authorized"
    token = again.json_body["fencing_token"]
    assert unverified_claims(token).digest == digest  # type: ignore[union-attr]
    entry = AuditEntry.objects.get(action="effect.approve")
    assert entry.after["content_digest"] == digest
    assert entry.before["payload"] == APPROVED
    return agent_token, token


def test_900_with_a_token_approved_for_100_is_refused_by_both_guards_and_shown(
    api, recipient, approved
):
    _, token = approved
    _, credential = recipient("payments")
    keys = public_keys_from_jwks(api.get("/api/v1/fencing/keys").json_body)
    guard = InMemoryEpochGuard()
    verifier = TokenVerifier(
        recipient="payments",
        public_keys=keys,
        guard=guard,
        reporter=ApiReporter(api, credential),
        require_content=True,
    )

    # The SDK's recipient guard: offline, before the epoch mark moves.
    sent = verifier.check(
        token, work_key="order-1", content=EffectContent("payment.refund", "order-1", STRETCHED)
    )
    assert (sent.accepted, sent.code) == (False, "payload_mismatch")
    assert guard.high_water("order-1") is None

    # The server's guard, asked online with the request's content.
    online = api.post(
        "/api/v1/fencing/check",
        {
            "fencing_token": token,
            "kind": "payment.refund",
            "target": "order-1",
            "payload": STRETCHED,
        },
        credential,
    )
    assert online.status_code == 200, online.content
    assert (online.json_body["valid"], online.json_body["code"]) == (False, "payload_mismatch")

    # Both refusals are recorded under the recipient's name, in the work item's history.
    reports = Effect.objects.filter(source="recipient", refusal_code="payload_mismatch")
    assert reports.count() == 2
    assert set(reports.values_list("target", flat=True)) == {"payments"}

    viewer = Client()
    viewer.force_login(make_user("olga-pay", "operator"))
    page = viewer.get("/work/order-1")
    assert page.status_code == 200
    assert page.content.decode().count("payload_mismatch") >= 2

    # The approved request itself passes both guards.
    same = EffectContent("payment.refund", "order-1", dict(APPROVED))
    assert verifier.check(token, work_key="order-1", content=same).accepted
    by_digest = api.post(
        "/api/v1/fencing/check", {"fencing_token": token, "digest": same.digest}, credential
    )
    assert by_digest.json_body["valid"] is True and by_digest.json_body["code"] is None
    assert reports.count() == 2


def test_a_changed_effect_is_a_new_proposal_not_the_approved_one(api, approved):
    agent_token, _ = approved
    effect = Effect.objects.get(idempotency_key="refund-1")
    r = propose(
        api,
        agent_token,
        {"lease_id": str(effect.lease_id), "epoch": effect.epoch},
        STRETCHED,
    )
    assert r.status_code == 409 and r.json_body["code"] == "idempotency_conflict"


def test_the_approver_decides_only_the_content_the_page_showed(api, holder):
    effect_rules(Queue.objects.get(name="default"), ("payment.*", "require_approval"))
    agent_token, grant = holder
    waiting = propose(api, agent_token, grant, APPROVED)
    effect_id = waiting.json_body["effect_id"]
    approver = Client()
    approver.force_login(make_user("abe-stale-page", "approver"))
    other = content_digest("payment.refund", "order-1", STRETCHED)
    approver.post(f"/takeovers/effects/{effect_id}/approve", {"digest": other})
    assert Effect.objects.get(id=effect_id).decision == "pending_approval"
    assert not AuditEntry.objects.filter(action__startswith="effect.approve").exists()
