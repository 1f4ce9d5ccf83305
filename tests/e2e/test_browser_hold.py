"""An operator's hold without revoke in real Chromium: the operator holds an agent's lease
with a reason; the agent's renewals go on (and say it is on hold) while its new effects
are refused `on_hold`; the live page shows the hold; the hold is lifted, effects flow
again; held again and escalated to a takeover that an approver approves."""

from __future__ import annotations

import pytest

from leaseboard.core.models import AuditEntry, Lease
from tests.builders import leased_item
from tests.e2e.pages import agent_call, agent_renew, confirm, shot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _effect(base: str, lease, token: str, key: str) -> tuple[int, dict]:  # type: ignore[no-untyped-def]
    body = {
        "lease_id": str(lease.id),
        "epoch": lease.epoch,
        "kind": "payment.refund",
        "target": "order-5",
        "idempotency_key": key,
        "payload": {"amount": "20.00"},
    }
    return agent_call(base, "/api/v1/effects", token, body)


def _hold(page, reason: str) -> None:  # type: ignore[no-untyped-def]
    page.select_option("#hold-reason_category", "misbehaving")
    page.fill("#hold-reason_text", reason)
    page.click("#hold-form button[type=submit]")
    page.wait_for_selector("#hold [data-on-hold]")


def test_hold_refuses_effects_while_renewals_succeed_then_lifts_then_escalates(
    live_server, browser, agent, olga_and_abe
):
    base = live_server.url
    executor, token = agent("refund-bot")
    lease = leased_item(executor, key="refund-5", ttl_ms=600_000)
    op = sign_in(browser, base, "olga")
    op.goto(f"{base}/work/refund-5")
    _hold(op, "refund amounts look doubled")
    shot(op, "hold-1-work-item")

    status, renewal = agent_renew(base, lease, token)
    assert status == 200 and renewal["on_hold"] is True
    assert renewal["hold_reason"] == "misbehaving: refund amounts look doubled"
    status, problem = _effect(base, lease, token, "r-1")
    assert status == 409 and problem["code"] == "on_hold"

    op.goto(f"{base}/")
    badge = op.locator(f"#lease-{lease.id} [data-on-hold]")
    badge.wait_for()
    assert "on hold" in badge.inner_text()
    shot(op, "hold-2-live-page")

    # Lifted: the same agent proposes again, under the same lease and epoch.
    op.goto(f"{base}/work/refund-5")
    op.fill("#hold-release-note", "amounts checked: fine")
    op.click("#hold-release-form button[type=submit]")
    op.wait_for_selector("#hold-form")
    assert agent_renew(base, lease, token)[1]["on_hold"] is False
    assert _effect(base, lease, token, "r-2")[0] == 201

    # Held again, then escalated to a takeover started from the hold's reason.
    _hold(op, "doubled again")
    op.click("#hold-escalate")
    op.wait_for_url("**/takeovers/request/refund-5")
    assert "escalated from hold: doubled again" in op.input_value('textarea[name="reason_text"]')
    assert op.input_value('select[name="reason_category"]') == "misbehaving"
    shot(op, "hold-3-escalate")
    op.click("#takeover-request button[type=submit]")
    assert "waiting for an approver" in op.content()
    assert agent_renew(base, lease, token)[0] == 200  # still its lease until approved

    ap = sign_in(browser, base, "abe")
    ap.goto(f"{base}/takeovers/pending/")
    ap.click("#inbox form.inline button[type=submit]")
    confirm(ap)  # approving revokes a live agent: said first
    ap.wait_for_selector(".msg-success")
    assert Lease.objects.get(id=lease.id).state == "revoked"
    status, problem = agent_renew(base, lease, token)
    assert status == 409 and problem["code"] == "lease_revoked"
    actions = list(AuditEntry.objects.order_by("seq").values_list("action", flat=True))
    assert [a for a in actions if a.startswith("lease.hold")] == [
        "lease.hold",
        "lease.hold_release",
        "lease.hold",
    ]
