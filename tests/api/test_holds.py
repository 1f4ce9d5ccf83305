"""An operator's hold without revoke, through the API the holder speaks: renewals go on
and say the lease is on hold; new effects (and approvals of waiting ones) are refused
`on_hold` and recorded; checkpoints go on; the hold is released, or escalated to a
takeover that ends the lease and the hold with it. Every step audited."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry, Effect, Lease, Queue
from leaseboard.core.services import approvals, holds
from leaseboard.domain.errors import Forbidden, LeaseRevoked, OnHold, ValidationFailed
from leaseboard.takeovers.services import takeover_approve, takeover_request
from tests.builders import effect_rules, make_user

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def effect(api, token, grant, key, kind="payment.refund"):  # type: ignore[no-untyped-def]
    body = {
        "lease_id": grant["lease_id"],
        "epoch": grant["epoch"],
        "kind": kind,
        "target": "order-1",
        "idempotency_key": key,
        "payload": {"amount": "10.00"},
    }
    return api.post("/api/v1/effects", body, token)


def renew(api, token, grant):  # type: ignore[no-untyped-def]
    return api.post(f"/api/v1/leases/{grant['lease_id']}/renew", {"epoch": grant["epoch"]}, token)


def test_a_hold_refuses_new_effects_while_renewals_and_checkpoints_go_on(api, holder):
    effect_rules(Queue.objects.get(name="default"), ("needs.approval", "require_approval"))
    token, grant = holder
    waiting = effect(api, token, grant, "w-1", kind="needs.approval")
    assert waiting.status_code == 202
    olga = make_user("olga-hold", "operator")
    holds.lease_hold(
        lease_id=grant["lease_id"],
        actor=Actor.human(olga),
        reason_category="misbehaving",
        reason_text="refunds look duplicated",
    )

    r = renew(api, token, grant)
    assert r.status_code == 200, r.content
    assert r.json_body["on_hold"] is True
    assert r.json_body["hold_reason"] == "misbehaving: refunds look duplicated"
    batch = api.post(
        "/api/v1/leases/renew",
        {"leases": [{"lease_id": grant["lease_id"], "epoch": grant["epoch"]}]},
        token,
    )
    assert batch.json_body["results"][0]["ok"] and batch.json_body["results"][0]["on_hold"]
    cp = api.post(
        f"/api/v1/leases/{grant['lease_id']}/checkpoints",
        {"epoch": grant["epoch"], "data": {"step": 3}},
        token,
    )
    assert cp.status_code == 201

    refused = effect(api, token, grant, "e-1")
    assert refused.status_code == 409 and refused.json_body["code"] == "on_hold"
    assert Effect.objects.get(idempotency_key="e-1").refusal_code == "on_hold"
    with pytest.raises(OnHold):
        approvals.effect_approve(
            effect_id=waiting.json_body["effect_id"],
            actor=Actor.human(make_user("abe-hold", "approver")),
        )
    assert Effect.objects.get(idempotency_key="w-1").decision == "pending_approval"

    holds.lease_hold_release(lease_id=grant["lease_id"], actor=Actor.human(olga), note="ok")
    assert renew(api, token, grant).json_body["on_hold"] is False
    assert effect(api, token, grant, "e-2").status_code == 201
    actions = list(
        AuditEntry.objects.filter(object_id=grant["lease_id"])
        .order_by("seq")
        .values_list("action", flat=True)
    )
    assert actions == ["lease.hold", "lease.hold_release"]


def test_who_may_hold_and_what_cannot_be_held(holder):
    _, grant = holder
    with pytest.raises(Forbidden):
        holds.lease_hold(
            lease_id=grant["lease_id"],
            actor=Actor.human(make_user("mia-hold", "manager")),
            reason_category="other",
            reason_text="x",
        )
    abe = Actor.human(make_user("abe-holds", "approver"))
    with pytest.raises(ValidationFailed):
        holds.lease_hold(
            lease_id=grant["lease_id"], actor=abe, reason_category="other", reason_text=" "
        )
    with pytest.raises(ValidationFailed):
        holds.lease_hold_release(lease_id=grant["lease_id"], actor=abe)
    assert not AuditEntry.objects.filter(action__startswith="lease.hold").exists()


def test_a_hold_escalated_to_a_takeover_ends_with_the_lease(api, holder):
    token, grant = holder
    olga = make_user("olga-esc", "operator")
    holds.lease_hold(
        lease_id=grant["lease_id"],
        actor=Actor.human(olga),
        reason_category="stuck",
        reason_text="loops on one refund",
    )
    req = takeover_request(
        work_key="order-1",
        actor=Actor.human(olga),
        reason_category="stuck",
        reason_text="escalated from hold: loops on one refund",
    )
    takeover_approve(request_pk=req.id, actor=Actor.human(make_user("abe-esc", "approver")))
    r = renew(api, token, grant)
    assert r.status_code == 409 and r.json_body["code"] == "lease_revoked"
    assert Lease.objects.get(id=grant["lease_id"]).state == "revoked"
    with pytest.raises(LeaseRevoked):
        holds.lease_hold_release(lease_id=grant["lease_id"], actor=Actor.human(olga))
