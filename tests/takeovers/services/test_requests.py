"""The hold a takeover request places ("hold the agent while this waits") ends with the
request: approved, rejected, expired or refused as stale; a hold an operator placed
separately stays (issue 28, point 4)."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry, Lease, WorkItem
from leaseboard.core.services import holds
from leaseboard.domain.errors import TakeoverConflict
from leaseboard.takeovers import services
from leaseboard.takeovers.models import TakeoverRequest
from leaseboard.takeovers.services.requests import hold_placed_by
from tests.builders import request_for

pytestmark = pytest.mark.usefixtures("fast_passwords")


def _held(key: str) -> WorkItem:
    return WorkItem.objects.get(key=key)


def test_rejecting_a_request_lifts_the_hold_it_placed(people, scene):
    req = request_for(scene.key, people.operator, hold_while_waiting=True)
    item = _held(scene.key)
    assert item.held_at_ms is not None and hold_placed_by(req, item)
    services.takeover_reject(
        request_pk=req.id, actor=Actor.human(people.approver), note="the agent recovered"
    )
    item.refresh_from_db()
    assert item.held_at_ms is None and item.hold_reason == ""
    lease = Lease.objects.get(id=scene.lease.id)
    assert lease.state == "active" and lease.held_at_ms is None  # the agent's copy too
    lifted = AuditEntry.objects.get(action="work_item.hold_lifted")
    assert lifted.actor_name == people.approver.username
    assert f"takeover #{req.id} rejected" in lifted.reason
    assert AuditEntry.objects.get(action="takeover.reject").after["hold_lifted"] is True


def test_rejecting_keeps_a_hold_an_operator_placed_separately(people, scene):
    holds.lease_hold(
        lease_id=scene.lease.id,
        actor=Actor.human(people.operator),
        reason_category="misbehaving",
        reason_text="doubled refunds",
    )
    # The item is held already: the request's own "hold while waiting" places nothing.
    req = request_for(scene.key, people.operator, hold_while_waiting=True)
    assert not hold_placed_by(req, _held(scene.key))
    services.takeover_reject(request_pk=req.id, actor=Actor.human(people.approver), note="no")
    item = _held(scene.key)
    assert item.held_at_ms is not None and item.hold_reason == "misbehaving: doubled refunds"
    assert not AuditEntry.objects.filter(action="work_item.hold_lifted").exists()


def test_a_hold_placed_after_releasing_the_requests_own_stays(people, scene):
    op = Actor.human(people.operator)
    req = request_for(scene.key, people.operator, hold_while_waiting=True)
    holds.lease_hold_release(lease_id=scene.lease.id, actor=op, note="too early")
    holds.lease_hold(
        lease_id=scene.lease.id, actor=op, reason_category="stuck", reason_text="mine now"
    )
    services.takeover_reject(request_pk=req.id, actor=Actor.human(people.approver), note="no")
    assert _held(scene.key).hold_reason == "stuck: mine now"


def test_the_sweep_lifts_the_hold_of_a_request_that_expired(people, scene, db_clock):
    req = request_for(scene.key, people.operator, hold_while_waiting=True)
    db_clock.advance(services.decision_ttl_ms() + 1)
    assert services.takeover_requests_expire_due() == 1
    req.refresh_from_db()
    assert req.status == "expired"
    item = _held(scene.key)
    assert item.held_at_ms is None
    lifted = AuditEntry.objects.get(action="work_item.hold_lifted")
    assert (lifted.actor_name, lifted.actor_role) == ("sweep", "system")
    assert f"takeover #{req.id} expired" in lifted.reason
    services.takeover_requests_expire_due()  # a second sweep writes nothing more
    assert AuditEntry.objects.filter(action="work_item.hold_lifted").count() == 1


def test_an_approval_refused_as_expired_lifts_the_hold_too(people, scene, db_clock):
    req = request_for(scene.key, people.operator, hold_while_waiting=True)
    db_clock.advance(services.decision_ttl_ms() + 1)
    with pytest.raises(TakeoverConflict, match="expired"):
        services.takeover_approve(request_pk=req.id, actor=Actor.human(people.approver))
    assert TakeoverRequest.objects.get(id=req.id).status == "expired"
    assert _held(scene.key).held_at_ms is None
    refused = AuditEntry.objects.get(action="takeover.approve_refused")
    assert refused.after["hold_lifted"] is True


def test_the_request_form_and_the_inbox_say_what_happens_to_the_hold(people, scene, client):
    client.force_login(people.operator)
    page = client.get(f"/takeovers/request/{scene.key}").content.decode()
    assert "The hold ends with the request: approved, rejected or expired" in page
    request_for(scene.key, people.operator, hold_while_waiting=True)
    client.force_login(people.approver)
    inbox = client.get("/takeovers/pending/").content.decode()
    assert "rejecting lifts the hold (so does expiry)" in inbox
    item_page = client.get(f"/work/{scene.key}").content.decode()
    assert "the hold goes if the request is rejected or expires" in item_page
