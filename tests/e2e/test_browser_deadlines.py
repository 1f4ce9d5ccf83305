"""True deadlines in real Chromium (issue 28, point 2): an effect held for approval under a
rule whose decide-by is 15 minutes shows a 15-minute countdown in the approver's inbox and
on its decision page, beside "holder renewing", while the holder renews a 9 s lease; the
countdown does not reset with each renewal. Once the lease ends, the page says the request
lapses."""

from __future__ import annotations

import re

import pytest

from leaseboard.core.models import Queue
from leaseboard.domain.policy import RuleSpec
from tests.builders import age_lease, effect_rules, leased_item, make_user
from tests.e2e.pages import agent_call, shot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FIFTEEN_MIN_MS = 15 * 60_000


def _minutes_left(text: str) -> int:
    found = re.match(r"(\d+) m \d\d s", text.strip())
    assert found, text
    return int(found.group(1))


def test_a_15_minute_decide_by_is_shown_as_such_while_the_holder_renews(
    live_server, browser, agent, settings
):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    make_user("abe", "approver")
    effect_rules(
        Queue.objects.get(name="default"),
        RuleSpec(
            "refunds",
            "payment.refund",
            decision="require_approval",
            decide_within_ms=FIFTEEN_MIN_MS,
        ),
    )
    base = live_server.url
    executor, token = agent("refund-bot")
    lease = leased_item(executor, key="refund-15", ttl_ms=9_000)
    status, body = agent_call(
        base,
        "/api/v1/effects",
        token,
        {
            "lease_id": str(lease.id),
            "epoch": lease.epoch,
            "kind": "payment.refund",
            "target": "order-15",
            "idempotency_key": "r-15",
        },
    )
    assert status == 202 and body["decision"] == "pending_approval", body
    effect_id = body["effect_id"]

    ap = sign_in(browser, base, "abe")
    for _ in range(3):  # the holder renews between the approver's looks
        assert agent_call(base, f"/api/v1/leases/{lease.id}/renew", token, {"epoch": 1})[0] == 200
        ap.goto(f"{base}/takeovers/pending/")
        row = ap.locator(f"#effect-{effect_id}")
        countdown = row.locator(".countdown")
        assert int(countdown.get_attribute("data-expires-in-ms")) > FIFTEEN_MIN_MS - 60_000
        assert _minutes_left(countdown.inner_text()) >= 14
        assert row.locator("[data-lease-note]").inner_text() == "holder renewing"
    shot(ap, "deadlines-1-inbox")

    ap.goto(f"{base}/takeovers/effects/{effect_id}")
    assert _minutes_left(ap.inner_text(".countdown")) >= 14
    assert ap.inner_text("[data-lease-note]") == "holder renewing"

    age_lease(lease.id, 60_000)  # the holder stops renewing; its lease has run out
    ap.reload()
    assert ap.inner_text("[data-lease-note]") == "lease ended: this request lapses"
    shot(ap, "deadlines-2-lapses")
