"""Findings against the old code, replayed through the real entry points: an operator with
no standing could reconcile a live agent's effect; a repeated idempotency key answered
with another effect; an agent named `human:<user>` broke that user's takeovers."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from leaseboard.core.models import AuditEntry, Effect
from tests.builders import make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


def _agent_with_effect(api, agent, key: str):  # type: ignore[no-untyped-def]
    _, token = agent()
    api.post("/api/v1/work-items", {"key": key}, token)
    lease = api.post(f"/api/v1/work-items/{key}/lease", {}, token).json_body
    effect = api.post(
        "/api/v1/effects",
        {
            "lease_id": lease["lease_id"],
            "epoch": lease["epoch"],
            "kind": "payment.refund",
            "target": "order-7",
            "idempotency_key": f"{key}-1",
            "payload": {"amount_cents": 700},
        },
        token,
    ).json_body
    assert effect["decision"] == "authorized"
    return token, lease, effect


def test_an_operator_without_standing_cannot_reconcile_a_live_agents_effect(api, agent, client):
    token, _, effect = _agent_with_effect(api, agent, "regress-reconcile")
    client.force_login(make_user("olga-no-standing", "operator"))
    audit_before = AuditEntry.objects.count()

    response = client.post(
        f"/takeovers/effects/{effect['effect_id']}/reconcile",
        {"resolution": "not_applied", "note": "looks stuck to me"},
    )

    assert response.status_code == 403
    row = Effect.objects.get(id=effect["effect_id"])
    assert (row.resolution, row.outcome) == ("", "")
    assert AuditEntry.objects.count() == audit_before
    # The agent's true outcome is still accepted, and counts for the reconciliation gate.
    outcome = api.post(
        f"/api/v1/effects/{effect['effect_id']}/outcome", {"outcome": "applied"}, token
    )
    assert outcome.status_code == 200 and outcome.json_body["outcome"] == "applied"


def test_an_approver_cannot_reconcile_either(api, agent, client):
    _, _, effect = _agent_with_effect(api, agent, "regress-approver")
    client.force_login(make_user("abe-approver", "approver", "operator"))
    response = client.post(
        f"/takeovers/effects/{effect['effect_id']}/reconcile",
        {"resolution": "confirmed", "note": "I think it went through"},
    )
    assert response.status_code == 403
    assert Effect.objects.get(id=effect["effect_id"]).resolution == ""


def test_a_repeated_idempotency_key_for_another_effect_is_a_conflict(api, agent):
    token, lease, effect = _agent_with_effect(api, agent, "regress-idem")
    body = {
        "lease_id": lease["lease_id"],
        "epoch": lease["epoch"],
        "kind": "payment.refund",
        "target": "order-7",
        "idempotency_key": "regress-idem-1",
        "payload": {"amount_cents": 700},
    }
    again = api.post("/api/v1/effects", body, token)
    assert again.status_code == 201 and again.json_body["effect_id"] == effect["effect_id"]
    for change in ({"payload": {"amount_cents": 90000}}, {"target": "order-8"}, {"kind": "x"}):
        response = api.post("/api/v1/effects", {**body, **change}, token)
        assert response.status_code == 409, change
        assert response.json_body["code"] == "idempotency_conflict"
    assert Effect.objects.filter(idempotency_key="regress-idem-1").count() == 1


def test_the_human_executor_namespace_is_reserved(client):
    make_user("olga", "operator")
    with pytest.raises(CommandError, match="reserved"):
        call_command("create_agent", "human:olga", "--all-queues")
    with pytest.raises(CommandError, match="reserved"):
        call_command("create_agent", "Human:Someone", "--all-queues")
