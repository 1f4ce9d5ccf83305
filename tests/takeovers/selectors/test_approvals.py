"""leaseboard.takeovers.selectors.approvals on real PostgreSQL: the approver's inbox holds
the pending takeover requests (soonest deadline first) and the effects waiting for approval
whose lease is live, with the evidence beside each (the item's newest lease events, its
effects without a known outcome); a waiting effect whose lease ended is listed apart; one
effect's decision page shows every byte of what would be decided on."""

from __future__ import annotations

import json

import pytest

from leaseboard.core.services.leases import lease_release
from leaseboard.domain.policy import RuleSpec
from leaseboard.takeovers.selectors.approvals import (
    LEASE_ENDED_NOTE,
    effect_decision_page,
    inbox,
    lease_note,
    payload_summary,
)
from tests.builders import effect_rules, effect_under, request_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


def _waiting(executor, lease, key: str, **payload):  # type: ignore[no-untyped-def]
    return effect_under(
        lease, executor, key, kind="payment.refund", target=f"order-{key}", payload=payload
    )


@pytest.fixture
def approvals(scene):  # type: ignore[no-untyped-def]
    effect_rules(
        scene.lease.work_item.queue,
        RuleSpec(name="refunds", kind="payment.*", decision="require_approval"),
        ("*", "allow"),
    )
    return scene


def test_an_empty_inbox(db):  # type: ignore[no-untyped-def]
    page = inbox()
    assert (page.count, page.requests, page.effects, page.expired) == (0, [], [], [])
    assert page.version


def test_requests_and_waiting_effects_with_their_evidence(approvals, people, agent):  # type: ignore[no-untyped-def]
    scene = approvals
    open_effect = effect_under(
        scene.lease, scene.agent, "open-1", kind="ticket.comment", target="t-1"
    )
    waiting = _waiting(scene.agent, scene.lease, "w-1", amount_cents=1200, currency="EUR")
    request = request_for(scene.key, people.operator)
    page = inbox()
    assert page.count == 2
    [row] = page.requests
    assert row.request.id == request.id and row.certainty == "active"
    assert row.decide_in_ms > 0
    assert [e.id for e in row.evidence.open_effects] == [open_effect.id]
    assert row.evidence.events and row.evidence.events[0].work_item_id == scene.lease.work_item_id
    [effect_row] = page.effects
    assert effect_row.effect.id == waiting.id and effect_row.lease_note == "holder renewing"
    assert effect_row.summary == [("amount_cents", "1200"), ("currency", "EUR")]
    assert page.expired == []


def test_a_waiting_effect_whose_lease_ended_is_listed_apart(approvals):  # type: ignore[no-untyped-def]
    scene = approvals
    waiting = _waiting(scene.agent, scene.lease, "w-2")
    before = inbox()
    lease_release(lease_id=scene.lease.id, executor=scene.agent, epoch=scene.lease.epoch)
    page = inbox()
    assert page.effects == [] and [e.id for e in page.expired] == [waiting.id]
    assert page.version != before.version  # the page knows it changed


def test_the_decision_page_shows_the_payload_as_stored(approvals):  # type: ignore[no-untyped-def]
    scene = approvals
    assert effect_decision_page("00000000-0000-0000-0000-000000000000") is None
    waiting = _waiting(scene.agent, scene.lease, "w-3", payee="Zoë", amount=5, extra={"b": 1})
    page = effect_decision_page(waiting.id)
    assert page is not None and page.waiting and page.certainty == "active"
    assert json.loads(page.payload_json) == {"payee": "Zoë", "amount": 5, "extra": {"b": 1}}
    assert "Zoë" in page.payload_json  # not escaped
    assert page.summary[:2] == [("amount", "5"), ("payee", "Zoë")]
    assert page.decide_in_ms > 0


def test_payload_summary_and_the_lease_notes() -> None:
    assert payload_summary("not a dict") == []
    summary = payload_summary({"zeta": "z", "amount": 3, "to": "x" * 100, "alpha": [1]}, limit=3)
    assert summary == [("amount", "3"), ("to", "x" * 80), ("alpha", "[1]")]
    assert lease_note(None) == LEASE_ENDED_NOTE and lease_note("expired") == LEASE_ENDED_NOTE
    assert "jeopardy" in lease_note("jeopardy")
