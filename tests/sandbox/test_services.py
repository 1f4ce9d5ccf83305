"""leaseboard.sandbox.services on real PostgreSQL, called directly as the sandbox's view
calls it: a payment under a current effect token is accepted and recorded with its epoch
mark, a retry of the same payment is the first acceptance again, and a request without a
token, or under an epoch below the mark, is recorded as refused with its code, no money
moved. tests/recipient/test_sandbox.py replays the same through the HTTP endpoint."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from leaseboard.sandbox.models import EpochMark, Payment
from leaseboard.sandbox.services import PaymentRequest, payment_attempt
from tests.builders import Holder

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fence() -> Iterator[Any]:
    """Each test database has its own signing key: drop keys cached by earlier tests."""
    from leaseboard.core.services.fencing import fencing_keys_forget
    from leaseboard.sandbox import fence

    fencing_keys_forget()
    fence._verifier = None
    yield fence
    fence._verifier = None


@pytest.fixture
def holder(api, agent) -> Holder:  # type: ignore[no-untyped-def]
    from leaseboard.core.models import Queue

    Queue.objects.get_or_create(name="payments")
    _, token = agent()
    r = api.post("/api/v1/work-items", {"key": "sbx-1", "queue": "payments"}, token)
    assert r.status_code == 201, r.content
    return Holder(api, token, "sbx-1").acquire()


def headers(h: Holder, token: str | None) -> Any:
    values = {"X-Fencing-Token": token, "X-Lease-Epoch": str(h.epoch), "X-Work-Key": h.key}
    return values.get


REFUND = PaymentRequest(amount_cents=700, currency="EUR", payee="acme")


def test_an_accepted_payment_is_recorded_once_and_a_retry_replays_it(holder, fence):  # type: ignore[no-untyped-def]
    effect = holder.effect("charge-1")
    first = payment_attempt(header=headers(holder, effect["fencing_token"]), request=REFUND)
    assert first.decision.accepted and not first.replayed
    assert (first.payment.status, first.payment.epoch, first.payment.amount_cents) == (
        "accepted",
        holder.epoch,
        700,
    )
    assert first.payment.effect_id == effect["effect_id"]
    assert EpochMark.objects.get(work_key="sbx-1").high_water == holder.epoch
    again = payment_attempt(header=headers(holder, effect["fencing_token"]), request=REFUND)
    assert again.replayed and again.payment.id == first.payment.id
    assert Payment.objects.filter(status="accepted").count() == 1


def test_a_payment_without_a_token_is_refused_and_recorded(holder, fence):  # type: ignore[no-untyped-def]
    attempt = payment_attempt(header=headers(holder, None), request=REFUND)
    assert not attempt.decision.accepted
    assert attempt.payment.status == "refused" and attempt.payment.refusal_code
    assert Payment.objects.filter(status="accepted").count() == 0


def test_a_stale_epoch_is_refused_below_the_mark(holder, fence):  # type: ignore[no-untyped-def]
    stale = holder.effect("old-1")
    holder.report(stale["effect_id"], "applied")
    holder.release()
    new = holder.acquire()
    fresh = new.effect("new-1")
    assert payment_attempt(
        header=headers(new, fresh["fencing_token"]),
        request=PaymentRequest(amount_cents=1, currency="EUR", payee="acme", idempotency_key="n1"),
    ).decision.accepted
    refused = payment_attempt(header=headers(holder, stale["fencing_token"]), request=REFUND)
    assert not refused.decision.accepted
    assert (refused.payment.refusal_code, refused.payment.epoch, refused.payment.high_water) == (
        "stale_epoch",
        holder.epoch,
        new.epoch,
    )
