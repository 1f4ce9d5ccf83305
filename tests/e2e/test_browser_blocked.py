"""Blocked work in real Chromium (issue 28, point 1): an agent's lease expires with an
effect whose outcome it never reported; an operator finds the item from the navigation
(and the live page's counter), takes it over to reconcile with break-glass, reconciles it
under standing, and the item leaves the list and its alert is resolved."""

from __future__ import annotations

import pytest

from leaseboard.core.models import Alert
from leaseboard.sweeps.services import sweep_run
from tests.builders import age_lease, effect_under, grant_break_glass, leased_item, make_user
from tests.e2e.pages import confirm, shot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_blocked_item_is_found_from_the_navigation_taken_over_and_reconciled(
    live_server, browser, agent, settings
):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    grant_break_glass(make_user("olga", "operator"))
    base = live_server.url
    executor, _ = agent("refund-bot")
    lease = leased_item(executor, key="refund-77")
    effect_under(lease, executor, "r-77", kind="payment.refund", target="order-77")
    age_lease(lease.id, 60_000)
    sweep_run()

    op = sign_in(browser, base, "olga")
    assert op.inner_text("#count-blocked") == "1 need reconciliation"
    op.click("nav.main-nav >> text=Needs reconciliation")
    row = op.locator('tr[data-work-key="refund-77"]')
    row.wait_for()
    assert "payment.refund on order-77 at epoch 1 by refund-bot" in row.inner_text()
    assert "no outcome reported" in row.inner_text()
    shot(op, "blocked-1-list")
    row.locator("text=Take over to reconcile").click()
    op.wait_for_url("**/takeovers/request/refund-77?reason_category=unknown_outcome")
    assert op.input_value('select[name="reason_category"]') == "unknown_outcome"
    op.click("#break-glass")
    confirm(op)
    op.wait_for_url("**/takeovers/standing/")
    form = op.locator("form.reconcile").first
    form.locator("select").select_option("not_applied")
    form.locator("input[name=note]").fill("no refund in the ledger for order-77")
    form.locator("button[type=submit]").click()
    op.wait_for_selector("text=Nothing to reconcile.")
    op.goto(f"{base}/blocked/")
    assert "Nothing is blocked" in op.inner_text("#blocked-count")
    alert = Alert.objects.get(kind="needs_reconciliation")
    assert alert.resolved_at_ms is not None
