"""Takeover clarity in real Chromium (issue 28, points 4 and 5): an operator asks to take an
agent's work over and holds the agent while the request waits (its renewals go on, its new
effects are refused `on_hold`); the work item page and the live row show the waiting
request (the approver goes from the row to decide); asking again says so before any form;
the approver sees who receives standing and confirms an approval that revokes a live
agent."""

from __future__ import annotations

import pytest

from leaseboard.core.models import Lease
from leaseboard.takeovers.models import TakeoverRequest
from tests.builders import leased_item, make_user
from tests.e2e.pages import agent_call, confirm, shot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_hold_while_pending_the_request_shown_and_the_approval_confirmed(
    live_server, browser, agent, settings
):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    make_user("olga", "operator")
    make_user("abe", "approver")
    base = live_server.url
    executor, token = agent("refund-bot")
    lease = leased_item(executor, key="refund-31", ttl_ms=600_000)

    op = sign_in(browser, base, "olga")
    op.goto(f"{base}/takeovers/request/refund-31")
    assert "standing is granted at a new epoch to you (olga)" in op.inner_text("main")
    op.select_option('select[name="reason_category"]', "misbehaving")
    op.fill('textarea[name="reason_text"]', "refunds look doubled")
    op.check('input[name="hold_while_waiting"]')
    op.click("#takeover-request button[type=submit]")
    op.wait_for_selector("#pending-takeover")
    req = TakeoverRequest.objects.get()
    text = op.inner_text("#pending-takeover")
    assert f"Takeover #{req.id} is waiting for an approver" in text
    assert "standing would go to human:olga (the requester)" in text
    assert op.locator("[data-on-hold]").first.is_visible()  # the item is on hold
    shot(op, "clarity-1-work-item")

    # The agent renews (and is told it is on hold); its new effects are refused.
    status, renewal = agent_call(base, f"/api/v1/leases/{lease.id}/renew", token, {"epoch": 1})
    assert status == 200 and renewal["on_hold"] is True
    status, problem = agent_call(
        base,
        "/api/v1/effects",
        token,
        {
            "lease_id": str(lease.id),
            "epoch": 1,
            "kind": "payment.refund",
            "target": "order-31",
            "idempotency_key": "r-31",
        },
    )
    assert status == 409 and problem["code"] == "on_hold"

    # The live page's row says it too, in place of "Request takeover".
    op.goto(f"{base}/")
    live_row = op.locator(f"#lease-{lease.id}")
    said = live_row.locator("[data-pending-takeover]").inner_text()
    assert f"Takeover #{req.id} is waiting for an approver: olga asked" in said
    assert "standing would go to human:olga (the requester)" in said
    assert live_row.locator(".takeover-link").count() == 0
    assert live_row.get_by_role("link", name="Decide").count() == 0  # not one's own

    # Asking again: the waiting request is said before any form.
    op.goto(f"{base}/takeovers/request/refund-31")
    assert "is already waiting for an approver" in op.inner_text("#pending-request")
    assert op.locator("#takeover-request").count() == 0

    ap = sign_in(browser, base, "abe")
    ap.goto(f"{base}/")  # the approver goes from the live row to the request
    ap.locator(f"#lease-{lease.id}").get_by_role(
        "link", name=f"Decide on takeover #{req.id}"
    ).click()
    ap.wait_for_url(f"**/takeovers/pending/#request-{req.id}")
    row = ap.locator(f"#request-{req.id}")
    assert "Standing goes to human:olga (the requester), not you." in row.inner_text()
    row.locator("form.inline button[type=submit]").click()
    dialog = ap.locator("dialog#confirm-dialog[open]")
    dialog.wait_for()
    said = dialog.inner_text()
    assert "refund-bot's lease is revoked now" in said and "human:olga gets standing" in said
    confirm(ap, "clarity-2-confirm-approve")
    ap.wait_for_selector(".msg-success")
    assert Lease.objects.get(id=lease.id).state == "revoked"
