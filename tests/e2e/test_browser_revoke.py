"""Operator revoke, bulk revoke and quarantine in real Chromium (issue 12 item 5): the
person asks, confirms in the dialog, and the agent is refused at its next call."""

from __future__ import annotations

import pytest

from tests.builders import leased_item
from tests.e2e.pages import agent_call, agent_renew, confirm, shot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_operator_revokes_a_lease_and_the_agent_is_told_why(
    live_server, browser, agent, olga_and_abe
):
    executor, token = agent("refund-bot")
    lease = leased_item(executor, key="refund-9", ttl_ms=600_000)
    page = sign_in(browser, live_server.url, "olga")
    page.goto(f"{live_server.url}/work/refund-9")
    page.select_option("#revoke-reason_category", "misbehaving")
    page.fill("#revoke-reason_text", "refunds order 9 twice")
    page.click("#revoke-form button[type=submit]")
    # Cancel first: nothing happens, focus goes back to the button.
    page.locator("dialog#confirm-dialog[open] [data-cancel]").click()
    assert page.evaluate("document.activeElement.closest('#revoke-form') !== null")
    assert agent_renew(live_server.url, lease, token)[0] == 200
    page.click("#revoke-form button[type=submit]")
    confirm(page, "revoke-1-confirm")
    page.wait_for_selector(".msg-success")
    assert "REVOKED" in page.inner_text(f"#lease-{lease.id}")
    shot(page, "revoke-2-done")

    status, problem = agent_renew(live_server.url, lease, token)
    assert status == 409 and problem["code"] == "lease_revoked"
    assert problem["reason"] == "misbehaving: refunds order 9 twice"


def test_an_operator_revokes_picked_leases_in_bulk(live_server, browser, agent, olga_and_abe):
    executor, token = agent("batch-bot")
    leases = [leased_item(executor, key=f"batch-{i}", ttl_ms=600_000) for i in range(3)]
    page = sign_in(browser, live_server.url, "olga")
    page.wait_for_selector(f"#lease-{leases[0].id}")
    page.check('input.pick[value="batch-0"]')
    page.check('input.pick[value="batch-2"]')
    page.click("#bulk-pick button.danger")
    page.wait_for_url("**/leases/revoke**")
    assert page.locator('input[name="lease"]:checked').count() == 2
    page.select_option("#id_reason_category", "incident")
    page.fill("#id_reason_text", "payments outage: stop the batch")
    shot(page, "bulk-revoke-1-form")
    page.click("#revoke-bulk-form button[type=submit]")
    confirm(page)
    page.wait_for_selector("#bulk-outcomes")
    assert "2 of 2 lease(s) revoked" in page.inner_text("#bulk-summary")
    shot(page, "bulk-revoke-2-outcomes")

    answers = [agent_renew(live_server.url, lease, token) for lease in leases]
    assert [(s, p.get("code")) for s, p in answers] == [
        (409, "lease_revoked"),
        (200, None),
        (409, "lease_revoked"),
    ]
    assert answers[0][1]["reason"] == "incident: payments outage: stop the batch"


def test_an_operator_quarantines_an_agent_and_an_approver_lifts_it(
    live_server, browser, agent, olga_and_abe
):
    bad, token = agent("loop-bot")
    leases = [leased_item(bad, key=f"loop-{i}", ttl_ms=600_000) for i in range(2)]
    assert agent_call(live_server.url, "/api/v1/work-items/loop-0", token)[0] == 200
    op = sign_in(browser, live_server.url, "olga")
    op.goto(f"{live_server.url}/executors/{bad.id}")
    op.select_option("#quarantine-reason_category", "misbehaving")
    op.fill("#quarantine-reason_text", "retries the same refund every second")
    op.click("#quarantine-form button[type=submit]")
    confirm(op, "quarantine-1-confirm")
    op.wait_for_selector("#quarantine")
    assert "retries the same refund" in op.inner_text("#quarantine")
    shot(op, "quarantine-2-banner")

    # The token is refused at once (this process forgot it); its leases were revoked.
    status, problem = agent_renew(live_server.url, leases[0], token)
    assert status == 401 and problem["code"] == "unauthenticated"

    ap = sign_in(browser, live_server.url, "abe")
    ap.goto(f"{live_server.url}/executors/{bad.id}")
    ap.fill("#lift-note", "fixed in release 2.4")
    ap.click("#lift-form button[type=submit]")
    confirm(ap)
    ap.wait_for_selector(".msg-success")
    assert ap.locator("#quarantine").count() == 0
    status, problem = agent_renew(live_server.url, leases[0], token)
    assert status == 409 and problem["code"] == "lease_revoked"  # authenticated again
    assert agent_call(live_server.url, "/api/v1/work-items/loop-0/lease", token, {})[0] == 201
