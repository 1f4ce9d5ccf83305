"""leaseboard.takeovers.selectors.timeline on real PostgreSQL: an intervention's page tells
its story in time order, its own events in words (requested, approved, revoked, granted,
recorded, handed back) beside the effects on its work item since the request (the old
holder's refused late send, with the epoch it was refused at), and when the old holder was
first refused."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.domain.errors import StaleEpoch
from leaseboard.takeovers import services
from leaseboard.takeovers.selectors.timeline import intervention_detail
from tests.builders import effect_under, request_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


def test_no_page_for_an_unknown_intervention(db):  # type: ignore[no-untyped-def]
    assert intervention_detail(2**31 - 1) is None


def test_the_story_of_a_takeover_in_order(people, scene):  # type: ignore[no-untyped-def]
    request = request_for(scene.key, people.operator)
    iv = services.takeover_approve(
        request_pk=request.id, actor=Actor.human(people.approver), note="go ahead"
    )
    with pytest.raises(StaleEpoch):  # the paused agent wakes up and tries to send
        effect_under(scene.lease, scene.agent, "late-1")
    actor = Actor.human(people.operator)
    services.effect_record_human(
        intervention_pk=iv.id,
        actor=actor,
        lease_id=iv.lease.id,
        epoch=iv.lease.epoch,
        kind="payment.refund",
        target="order-7",
        outcome="applied",
    )
    services.standing_hand_back(
        intervention_pk=iv.id, actor=actor, lease_id=iv.lease.id, epoch=iv.lease.epoch, note="done"
    )
    detail = intervention_detail(iv.id)
    assert detail is not None and detail.intervention.id == iv.id
    kinds = [t.kind for t in detail.timeline]
    assert kinds.index("requested") < kinds.index("approved") < kinds.index("effect_refused")
    assert kinds.index("effect_recorded") < kinds.index("handed_back")
    assert [t.at_ms for t in detail.timeline] == sorted(t.at_ms for t in detail.timeline)
    texts = {t.kind: t.text for t in detail.timeline}
    assert texts["approved"] == "approved: go ahead"
    assert texts["handed_back"] == "handed back to the agent pool: done"
    assert texts["revoked"] == f"revoked {scene.agent.name}'s lease at epoch {scene.lease.epoch}"
    assert texts["effect_refused"].startswith(
        f"payment.refund on order-7 at epoch {scene.lease.epoch} refused: "
    )
    assert "recorded payment.refund on order-7" in texts["effect_recorded"]
    refused = [e for e in detail.effects if e.decision == "refused"]
    assert detail.first_refused_ms == refused[0].proposed_at_ms
    assert detail.request_to_decision_ms >= 0
    # The human's own effect is told once, by the intervention's event.
    assert kinds.count("effect_recorded") == 1 and "effect_authorized" not in kinds
