"""The online fencing check (leaseboard.core.services.fencing_check), on real PostgreSQL:
a current effect token is valid and says its work item, queue and lease's certainty; a
superseded one is `stale_epoch` naming the current epoch; an ended lease's is its end's
code; a request that is not what the token was decided on is `payload_mismatch`, kept in
the work item's effect history as the recipient's refusal; a forged token is refused
without a database answer. Nothing else is written."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import Effect
from leaseboard.core.services.effects import effect_report_outcome
from leaseboard.core.services.fencing_check import FencingAnswer, fencing_check
from leaseboard.core.services.leases import lease_acquire, lease_release
from leaseboard_recipient.tokens import content_digest
from tests.builders import effect_under, leased_item

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def _effect(executor, lease, key: str) -> Effect:  # type: ignore[no-untyped-def]
    return effect_under(
        lease, executor, key, kind="payment.charge", target="order-1", payload={"amount_cents": 100}
    )


def test_a_current_effect_token_is_valid_and_says_what_it_is_about(agent, recipient) -> None:
    executor, _ = agent()
    lease = leased_item(executor, key="fc-1")
    effect = _effect(executor, lease, "fc-1a")
    checker = Actor.recipient(recipient()[0])
    digest = content_digest("payment.charge", "order-1", {"amount_cents": 100})
    answer = fencing_check(actor=checker, token=effect.fencing_token, digest=digest)
    assert isinstance(answer, FencingAnswer)
    assert (answer.valid, answer.code, answer.certainty) == (True, None, "active")
    assert (answer.work_key, answer.epoch, answer.current_epoch) == ("fc-1", 1, 1)
    assert (answer.effect_id, answer.queue) == (str(effect.id), "default")
    assert answer.policy_version == effect.policy_version
    assert answer.expires_in_ms is not None and answer.expires_in_ms > 0
    assert Effect.objects.filter(source=Effect.Source.RECIPIENT).count() == 0


def test_a_token_of_an_ended_or_superseded_lease_is_refused_naming_why(agent, recipient) -> None:
    first, _ = agent()
    grant = leased_item(first, key="fc-2")
    effect = _effect(first, grant, "fc-2a")
    checker = Actor.recipient(recipient()[0])
    effect_report_outcome(effect_id=effect.id, executor=first, outcome="applied")
    lease_release(lease_id=grant.id, executor=first, epoch=1)
    ended = fencing_check(actor=checker, token=effect.fencing_token)
    assert (ended.valid, ended.code, ended.certainty) == (False, "lease_released", "released")
    second, _ = agent()
    lease_acquire(work_key="fc-2", executor=second)
    stale = fencing_check(actor=checker, token=effect.fencing_token)
    assert (stale.valid, stale.code, stale.current_epoch, stale.epoch) == (
        False,
        "stale_epoch",
        2,
        1,
    )


def test_a_changed_request_is_a_payload_mismatch_kept_as_the_recipients_refusal(
    agent, recipient
) -> None:
    executor, _ = agent()
    lease = leased_item(executor, key="fc-3")
    effect = _effect(executor, lease, "fc-3a")
    who, _ = recipient("payments-api")
    stretched = content_digest("payment.charge", "order-1", {"amount_cents": 100_000})
    answer = fencing_check(actor=Actor.recipient(who), token=effect.fencing_token, digest=stretched)
    assert (answer.valid, answer.code, answer.current_epoch) == (False, "payload_mismatch", 1)
    refusal = Effect.objects.get(source=Effect.Source.RECIPIENT)
    assert (refusal.work_item_id, refusal.refusal_code, refusal.target) == (
        lease.work_item_id,
        "payload_mismatch",
        "payments-api",
    )


def test_a_forged_token_is_refused_without_naming_a_work_item(agent, recipient) -> None:
    executor, _ = agent()
    lease = leased_item(executor, key="fc-4")
    token = _effect(executor, lease, "fc-4a").fencing_token
    forged = token[:-6] + ("AAAAAA" if not token.endswith("AAAAAA") else "BBBBBB")
    answer = fencing_check(actor=Actor.recipient(recipient()[0]), token=forged)
    assert answer.valid is False and answer.current_epoch is None
    assert answer.code not in (None, "stale_epoch", "payload_mismatch")
    garbage = fencing_check(actor=Actor.recipient(recipient()[0]), token="not a token")
    assert (garbage.valid, garbage.work_key, garbage.current_epoch) == (False, None, None)
