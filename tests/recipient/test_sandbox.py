"""The payments sandbox on PostgreSQL: a recipient whose epoch check commits with its write.

Accepted at the current epoch; refused below the high-water mark even with a genuine
token; forged and tampered tokens refused; refusals reported and shown as recipient effects.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from leaseboard.core.models import Alert, Effect
from leaseboard.sandbox.models import EpochMark, Payment
from tests.builders import Holder

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("demo_mounted")]


def pay(client: Any, headers: dict[str, str], amount: int = 500, key: str = "") -> Any:
    """POST /sandbox/payments through Django's test client with fencing headers."""
    extra = {"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()}
    body = {"amount_cents": amount, "currency": "EUR", "payee": "acme"}
    if key:
        body["idempotency_key"] = key
    response = client.post(
        "/sandbox/payments", data=json.dumps(body), content_type="application/json", **extra
    )
    response.json_body = json.loads(response.content or b"null")
    return response


def fencing_headers(holder: Holder, token: str | None = None) -> dict[str, str]:
    return {
        "X-Fencing-Token": token or holder.fencing_token,
        "X-Lease-Epoch": str(holder.epoch),
        "X-Work-Key": holder.key,
    }


def take_over(old):
    """Release `old`'s lease and grant the same work item to `old`'s agent at epoch + 1
    (at once: every effect `old` made has its outcome, so nothing fences the grant)."""
    old.release()
    return old.acquire()


def paid(client: Any, h: Holder, idempotency_key: str) -> dict:
    """An effect under `h`, paid through the sandbox and reported applied; its token."""
    effect = h.effect(idempotency_key)
    assert pay(client, fencing_headers(h, effect["fencing_token"])).status_code == 201
    h.report(effect["effect_id"], "applied")
    return effect


@pytest.mark.django_db(transaction=True)
def test_it_accepts_a_payment_at_the_current_epoch_and_records_it(
    client, holder_factory, fresh_fence
):
    h = holder_factory("order-accept")
    effect = h.effect("charge-1")
    r = pay(client, fencing_headers(h, effect["fencing_token"]), amount=700)
    assert r.status_code == 201, r.content
    assert r.json_body["status"] == "accepted" and r.json_body["epoch"] == h.epoch
    assert EpochMark.objects.get(work_key="order-accept").high_water == h.epoch
    row = Payment.objects.get()
    assert (row.status, row.amount_cents, row.effect_id) == ("accepted", 700, effect["effect_id"])
    # A retry with the same effect token is the same payment, not a second one.
    again = pay(client, fencing_headers(h, effect["fencing_token"]), amount=700)
    assert again.status_code == 200 and again.json_body["replayed"] is True
    assert Payment.objects.filter(status="accepted").count() == 1


@pytest.mark.django_db(transaction=True)
def test_it_refuses_an_epoch_below_the_high_water_mark(client, holder_factory, fresh_fence):
    old = holder_factory("order-stale")
    # A genuine effect token, signed for epoch 1 and not yet expired.
    stale_headers = fencing_headers(old, paid(client, old, "old-0")["fencing_token"])
    new = take_over(old)
    assert new.epoch == old.epoch + 1
    current = new.effect("new-0")["fencing_token"]
    assert pay(client, fencing_headers(new, current), key="new-1").status_code == 201

    r = pay(client, stale_headers, key="old-1")
    assert r.status_code == 409, r.content
    body = r.json_body
    assert body["code"] == "stale_epoch"
    assert (body["your_epoch"], body["current_epoch"]) == (old.epoch, new.epoch)
    assert EpochMark.objects.get(work_key="order-stale").high_water == new.epoch
    refused = Payment.objects.get(status="refused")
    assert (refused.refusal_code, refused.epoch, refused.high_water) == (
        "stale_epoch",
        old.epoch,
        new.epoch,
    )
    assert Payment.objects.filter(status="accepted").count() == 2


@pytest.mark.django_db(transaction=True)
def test_it_refuses_a_lease_token_which_authorizes_no_effect(
    client, holder_factory, fresh_fence, settings
):
    h = holder_factory("order-lease-token")
    r = pay(client, fencing_headers(h))  # the acquire's token: standing, but no effect
    assert r.status_code == 403 and r.json_body["code"] == "no_effect", r.content
    assert not EpochMark.objects.exists()
    # The documented setting keeps the old behaviour for a recipient that needs it.
    settings.LEASEBOARD_SANDBOX_ACCEPT_LEASE_TOKENS = True
    fresh_fence._verifier = None
    assert pay(client, fencing_headers(h)).status_code == 201


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("tamper", ["signature", "payload", "garbage", "other_work"])
def test_it_refuses_forged_or_tampered_tokens(client, holder_factory, fresh_fence, tamper):
    h = holder_factory("order-forged")
    head, _, sig = h.fencing_token.rpartition(".")
    token = {
        "signature": head + "." + ("A" if sig[0] != "A" else "B") + sig[1:],
        "payload": head[:-2] + ("xx" if head[-2:] != "xx" else "yy") + "." + sig,
        "garbage": "not-a-token",
        "other_work": holder_factory("order-other").fencing_token,
    }[tamper]
    r = pay(client, fencing_headers(h, token))
    assert r.status_code == 403, r.content
    assert r.json_body["code"] in {"forged", "malformed", "wrong_work"}
    assert not Payment.objects.filter(status="accepted").exists()
    assert Payment.objects.get().status == "refused"
    assert not EpochMark.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_it_refuses_a_payment_without_a_token(client, holder_factory, fresh_fence):
    h = holder_factory("order-naked")
    r = pay(client, {"X-Lease-Epoch": str(h.epoch), "X-Work-Key": h.key})
    assert r.status_code == 403 and r.json_body["code"] == "malformed"


def test_the_refusal_is_reported_and_shown_as_a_recipient_effect(
    live_server, client, holder_factory, recipient, fresh_fence, settings
):
    _, sandbox_credential = recipient("payments-sandbox")
    settings.LEASEBOARD_SANDBOX_TOKEN = sandbox_credential
    settings.LEASEBOARD_SANDBOX_REPORT_URL = live_server.url
    old = holder_factory("order-reported")
    stale_headers = fencing_headers(old, paid(client, old, "old-0")["fencing_token"])
    new = take_over(old)
    assert (
        pay(client, fencing_headers(new, new.effect("new-0")["fencing_token"])).status_code == 201
    )
    assert pay(client, stale_headers, key="late").status_code == 409

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        reported = Effect.objects.filter(source=Effect.Source.RECIPIENT).first()
        if reported is not None:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the sandbox's refusal never reached /api/v1/recipient-reports")
    assert reported.executor_id is None  # filed by a recipient, under its own name
    assert reported.work_item.key == "order-reported"
    assert (reported.decision, reported.refusal_code) == ("refused", "stale_epoch")
    assert (reported.epoch, reported.current_epoch) == (old.epoch, new.epoch)
    assert reported.target == "payments-sandbox"
    alert = Alert.objects.get(kind=Alert.Kind.RECIPIENT_REFUSAL)
    assert (alert.epoch, alert.occurrences) == (old.epoch, 1)


@pytest.mark.django_db
def test_it_refuses_a_payment_decided_outside_the_payments_queue(
    client, holder_factory, fresh_fence
):
    """A payments recipient takes payments only from the `payments` queue: a charge an
    agent got authorized in `default` (no approval rules there) is refused wrong_queue."""
    lax = holder_factory("pay-1-alt", queue="default")
    refused = pay(client, fencing_headers(lax, lax.effect("lax-1")["fencing_token"]))
    assert refused.status_code == 403, refused.content
    assert refused.json()["code"] == "wrong_queue"
    assert Payment.objects.get(work_key="pay-1-alt").refusal_code == "wrong_queue"
    ok = holder_factory("pay-1")
    assert pay(client, fencing_headers(ok, ok.effect("ok-1")["fencing_token"])).status_code == 201
