"""leaseboard.takeovers.services.expiry on real PostgreSQL: the sweep step expires each
undecided request once its decision deadline has passed (with one alert each), leaves
decided and not-yet-due requests alone, lifts the hold an expired request placed but not
an operator's own, and marks a standing whose lease ended as lapsed, once."""

from __future__ import annotations

import pytest
from django.db import transaction

from leaseboard.core.authority import Actor
from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Alert, Lease, WorkItem
from leaseboard.core.services import holds
from leaseboard.core.services.leases import lease_expire_if_due_locked
from leaseboard.takeovers import services
from leaseboard.takeovers.models import TakeoverRequest
from leaseboard.takeovers.services.expiry import takeover_requests_expire_due
from tests.builders import age_lease, leased_item, request_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


def test_only_requests_past_their_deadline_expire_each_with_one_alert(people, scene, agent):  # type: ignore[no-untyped-def]
    other, _ = agent()
    leased_item(other, key="xp-2")
    due = request_for(scene.key, people.operator)
    later = request_for("xp-2", people.operator)
    TakeoverRequest.objects.filter(id=later.id).update(decide_by_ms=due.decide_by_ms + 60_000)
    at = due.decide_by_ms  # exactly at its deadline: due
    assert takeover_requests_expire_due(now_ms=at - 1) == 0
    assert takeover_requests_expire_due(now_ms=at) == 1
    assert takeover_requests_expire_due(now_ms=at) == 0  # once
    statuses = dict(TakeoverRequest.objects.values_list("id", "status"))
    assert (statuses[due.id], statuses[later.id]) == ("expired", "pending")
    [alert] = Alert.objects.filter(kind="takeover_expired")
    assert alert.detail == {"takeover_request": due.id} and alert.due_at_ms == due.decide_by_ms
    due.refresh_from_db()
    assert (due.decided_at_ms, due.decision_note) == (at, "expired undecided")


def test_a_decided_request_never_expires(people, scene):  # type: ignore[no-untyped-def]
    req = request_for(scene.key, people.operator)
    services.takeover_reject(request_pk=req.id, actor=Actor.human(people.approver), note="no")
    assert takeover_requests_expire_due(now_ms=req.decide_by_ms + 1) == 0
    assert TakeoverRequest.objects.get(id=req.id).status == "rejected"


def test_many_due_requests_expire_batch_after_batch(people, agent):  # type: ignore[no-untyped-def]
    reqs = []
    for n in range(5):
        executor, _ = agent()
        reqs.append(
            request_for(leased_item(executor, key=f"xb-{n}").work_item.key, people.operator)
        )
    latest = max(r.decide_by_ms for r in reqs)
    assert takeover_requests_expire_due(now_ms=latest, batch=2) == 5
    assert set(TakeoverRequest.objects.values_list("status", flat=True)) == {"expired"}


def test_the_hold_of_an_expired_request_is_lifted_but_an_operators_own_stays(
    people, scene, agent, db_clock
):  # type: ignore[no-untyped-def]
    request_for(scene.key, people.operator, hold_while_waiting=True)
    other, _ = agent()
    mine = leased_item(other, key="xh-own")
    holds.lease_hold(
        lease_id=mine.id,
        actor=Actor.human(people.operator),
        reason_category="misbehaving",
        reason_text="doubled refunds",
    )
    db_clock.advance(services.decision_ttl_ms() + 1)
    assert takeover_requests_expire_due() == 1
    assert WorkItem.objects.get(key=scene.key).held_at_ms is None
    assert WorkItem.objects.get(key="xh-own").held_at_ms is not None


def test_a_standing_whose_lease_ended_is_marked_lapsed_once(people, scene):  # type: ignore[no-untyped-def]
    iv = services.takeover_approve(
        request_pk=request_for(scene.key, people.operator).id,
        actor=Actor.human(people.approver),
        note="ok",
    )
    assert takeover_requests_expire_due() == 0  # live standing: nothing to mark
    age_lease(iv.lease.id, iv.lease.ttl_ms + 1000)
    with transaction.atomic():
        locked = Lease.objects.select_for_update().get(id=iv.lease.id)
        assert lease_expire_if_due_locked(locked, db_now_ms())
    assert takeover_requests_expire_due() == 1
    assert takeover_requests_expire_due() == 0
    iv.refresh_from_db()
    assert iv.outcome == "lapsed" and iv.events.filter(kind="lapsed").count() == 1
