"""An operator's hold without revoke, through the API the holder speaks: renewals go on
and say the lease is on hold; new effects (and approvals of waiting ones) are refused
`on_hold` and recorded; checkpoints go on; the hold is released, or escalated to a
takeover that ends the lease and the hold with it. Every step audited."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry, Effect, Lease, Queue, WorkItem
from leaseboard.core.services import approvals, holds
from leaseboard.domain.errors import Forbidden, OnHold, ValidationFailed
from leaseboard.takeovers.services import takeover_approve, takeover_request
from tests.api.effects import effect_propose
from tests.builders import effect_rules, make_user

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def effect(api, token, grant, key, kind="payment.refund"):  # type: ignore[no-untyped-def]
    return effect_propose(api, token, grant, key, kind=kind, payload={"amount": "10.00"})


def renew(api, token, grant):  # type: ignore[no-untyped-def]
    return api.post(f"/api/v1/leases/{grant['lease_id']}/renew", {"epoch": grant["epoch"]}, token)


def _hold(  # type: ignore[no-untyped-def]
    grant,
    who="olga-item",
    role="operator",
    category="misbehaving",
    text="refunds look duplicated",
):
    """`who` (a new user with `role`) holds the grant's lease; the user."""
    user = make_user(who, role)
    holds.lease_hold(
        lease_id=grant["lease_id"],
        actor=Actor.human(user),
        reason_category=category,
        reason_text=text,
    )
    return user


def test_a_hold_refuses_new_effects_while_renewals_and_checkpoints_go_on(api, holder):
    effect_rules(Queue.objects.get(name="default"), ("needs.approval", "require_approval"))
    token, grant = holder
    waiting = effect(api, token, grant, "w-1", kind="needs.approval")
    assert waiting.status_code == 202
    olga = _hold(grant, "olga-hold")

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
        _hold(grant, "mia-hold", role="manager", category="other", text="x")
    abe = Actor.human(make_user("abe-holds", "approver"))
    with pytest.raises(ValidationFailed):
        holds.lease_hold(
            lease_id=grant["lease_id"], actor=abe, reason_category="other", reason_text=" "
        )
    with pytest.raises(ValidationFailed):
        holds.lease_hold_release(lease_id=grant["lease_id"], actor=abe)
    assert not AuditEntry.objects.filter(action__startswith="lease.hold").exists()


def test_a_hold_escalated_to_a_takeover_is_lifted_by_the_approval(api, holder):
    token, grant = holder
    olga = _hold(grant, "olga-esc", category="stuck", text="loops on one refund")
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
    # The hold was the work item's; the approved takeover (an operator's decision, decided
    # by an approver) ended it, and said so.
    item = WorkItem.objects.get(key="order-1")
    assert item.held_at_ms is None and item.hold_reason == ""
    lifted = AuditEntry.objects.get(action="work_item.hold_lifted", work_item=item)
    assert lifted.before["reason"] == "stuck: loops on one refund"
    assert Lease.objects.get(work_item=item, state="active").held_at_ms is None
    with pytest.raises(ValidationFailed, match="not on hold"):
        holds.lease_hold_release(lease_id=grant["lease_id"], actor=Actor.human(olga))


# -- the hold belongs to the work item (docs/design.md §9, "no route around a rule") -------


def test_releasing_and_acquiring_again_does_not_escape_a_hold(api, holder, agent):
    """The reproduction: A is held (renew says on_hold, effects refused), releases, acquires
    the same item again and proposes a refund. The hold is the item's: nobody acquires it."""
    token, grant = holder
    _hold(grant)
    assert renew(api, token, grant).json_body["on_hold"] is True
    assert effect(api, token, grant, "held-1").json_body["code"] == "on_hold"
    released = api.post(
        f"/api/v1/leases/{grant['lease_id']}/release", {"epoch": grant["epoch"]}, token
    )
    assert released.status_code == 200

    again = api.post("/api/v1/work-items/order-1/lease", {}, token)
    assert again.status_code == 409, again.content
    assert again.json_body["code"] == "on_hold"
    assert again.json_body["reason"] == "misbehaving: refunds look duplicated"
    assert "misbehaving: refunds look duplicated" in again.json_body["detail"]
    _, other = agent("someone-else")
    assert api.post("/api/v1/work-items/order-1/lease", {}, other).json_body["code"] == "on_hold"
    item = WorkItem.objects.get(key="order-1")
    assert item.epoch == 1 and not Lease.objects.filter(work_item=item, epoch=2).exists()
    assert not Effect.objects.filter(decision="authorized").exists()


def test_a_hold_lifted_by_an_operator_lets_the_item_be_acquired_again(api, holder):
    token, grant = holder
    _hold(grant, "olga-lift")
    api.post(f"/api/v1/leases/{grant['lease_id']}/release", {"epoch": grant["epoch"]}, token)
    assert api.post("/api/v1/work-items/order-1/lease", {}, token).status_code == 409
    # The lease it was put on through has ended; the hold is lifted through it all the same.
    holds.lease_hold_release(
        lease_id=grant["lease_id"],
        actor=Actor.human(make_user("abe-lift", "approver")),
        note="duplicates explained",
    )
    again = api.post("/api/v1/work-items/order-1/lease", {}, token)
    assert again.status_code == 201 and again.json_body["epoch"] == 2
    assert effect(api, token, again.json_body, "after-lift").status_code == 201
    entry = AuditEntry.objects.get(action="lease.hold_release")
    assert entry.reason == "duplicates explained"
    assert entry.before["reason"] == "misbehaving: refunds look duplicated"


def test_a_hold_outlives_an_expiry_and_an_operator_revoke(api, holder, agent):
    from leaseboard.core.services.leases import lease_revoke

    token, grant = holder
    _hold(grant, "olga-revoke")
    lease_revoke(
        lease_id=grant["lease_id"],
        actor=Actor.human(make_user("abe-revoke", "approver")),
        reason_category="misbehaving",
        reason_text="stop it",
    )
    _, other = agent("next-in-line")
    refused = api.post("/api/v1/work-items/order-1/lease", {}, other)
    assert refused.status_code == 409 and refused.json_body["code"] == "on_hold"


def test_a_grant_a_person_makes_on_a_held_item_carries_the_hold(holder, agent):
    """The item's hold is copied onto every new lease (an assignment from standing), so the
    live lease and its work item never disagree."""
    from django.db import transaction

    from leaseboard.core.clock import db_now_ms
    from leaseboard.core.locking import work_item_locked_by
    from leaseboard.core.services.leases import lease_grant_locked, lease_release

    token, grant = holder
    _hold(grant, "olga-copy")
    holder_agent = Lease.objects.get(id=grant["lease_id"]).holder
    lease_release(lease_id=grant["lease_id"], executor=holder_agent, epoch=grant["epoch"])
    other, _ = agent("assignee")
    with transaction.atomic():
        item = work_item_locked_by(key="order-1")
        lease = lease_grant_locked(item=item, holder=other, now_ms=db_now_ms(), grant_kind="assign")
    assert lease.held_at_ms == item.held_at_ms and lease.hold_reason == item.hold_reason
