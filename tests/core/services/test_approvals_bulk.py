"""Approve or reject by query (issue 28, point 7): each waiting effect by the one decision,
bound to the digest the page showed, an outcome per effect, the bulk audited, gated."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry, Effect
from leaseboard.core.services.approvals_bulk import effects_decide_bulk
from leaseboard.domain.errors import Forbidden, ValidationFailed
from tests.builders import make_user, pending_refunds

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


def _waiting(agent, n: int) -> list[Effect]:  # type: ignore[no-untyped-def]
    bot, _ = agent("refund-bot")
    out = pending_refunds(bot, n)
    assert {e.decision for e in out} == {"pending_approval"}
    return out


def _digests(effects: list[Effect]) -> dict[str, str]:
    return {str(e.id): e.content_digest for e in effects}


def test_approve_by_query_authorizes_each_and_refuses_a_changed_or_decided_one(agent):
    effects = _waiting(agent, 3)
    abe = Actor.human(make_user("abe", "approver"))
    digests = _digests(effects)
    digests[str(effects[2].id)] = "0" * 64  # the page showed other content
    bulk = effects_decide_bulk(
        decision="approve",
        effect_ids=[str(e.id) for e in effects],
        digests=digests,
        actor=abe,
        note="batch of small refunds",
        query={"kind": "payment.refund"},
    )
    assert [o.ok for o in bulk.outcomes] == [True, True, False]
    assert bulk.outcomes[2].code == "payload_mismatch"
    assert bulk.outcomes[0].about == "payment.refund on order-0"
    assert [Effect.objects.get(id=e.id).decision for e in effects] == [
        "authorized",
        "authorized",
        "pending_approval",
    ]
    assert AuditEntry.objects.filter(action="effect.approve").count() == 2
    entry = AuditEntry.objects.get(action="effect.approve_bulk")
    assert entry.after["succeeded"] == 2 and entry.before["query"] == {"kind": "payment.refund"}
    again = effects_decide_bulk(
        decision="reject",
        effect_ids=[str(effects[0].id)],
        digests=_digests(effects),
        actor=abe,
        note="changed my mind",
    )
    assert again.outcomes[0].code == "already_decided"


def test_reject_by_query_needs_a_note_and_an_approver(agent):
    effects = _waiting(agent, 2)
    ids = [str(e.id) for e in effects]
    approver = Actor.human(make_user("abe", "approver"))
    operator = Actor.human(make_user("olga", "operator"))
    unnoted = {"effect_ids": ids, "digests": {}, "note": ""}
    with pytest.raises(ValidationFailed, match="needs a note"):
        effects_decide_bulk(decision="reject", actor=approver, **unnoted)
    with pytest.raises(Forbidden):
        effects_decide_bulk(decision="approve", actor=operator, **unnoted)
    bulk = effects_decide_bulk(
        decision="reject",
        effect_ids=ids,
        digests=_digests(effects),
        actor=Actor.human(make_user("abe2", "approver")),
        note="not during the freeze",
    )
    assert bulk.succeeded == 2
    assert {Effect.objects.get(id=i).refusal_code for i in ids} == {"policy_denied"}
