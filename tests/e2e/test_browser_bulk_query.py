"""Bulk by query in real Chromium (issue 28, point 7): an operator filters the live page to
one agent, chooses "Revoke all N matching this filter", sees the count first, confirms,
and reads an outcome per lease; the other agent's leases are untouched."""

from __future__ import annotations

from leaseboard.core.models import Lease
from tests.builders import leased_item, make_user
from tests.e2e.pages import SIGNED_IN_BROWSER_TEST, confirm_bulk, shot, sign_in

pytestmark = SIGNED_IN_BROWSER_TEST


def test_revoke_all_matching_a_filter_counts_first_and_reports_each_lease(
    live_server, browser, agent
):
    make_user("olga", "operator")
    bad, _ = agent("loopy-bot")
    good, _ = agent("steady-bot")
    for i in range(7):
        leased_item(bad, key=f"loop-{i}", ttl_ms=600_000)
    for i in range(3):
        leased_item(good, key=f"fine-{i}", ttl_ms=600_000)

    op = sign_in(browser, live_server.url, "olga")
    op.goto(f"{live_server.url}/?holder=loopy-bot")
    link = op.locator("#revoke-matching")
    assert link.inner_text() == "Revoke all 7 matching this filter…"
    link.click()
    op.wait_for_selector("#match-count")
    assert "7 agent leases match the filter (holder: loopy-bot)" in op.inner_text("#match-count")
    assert op.locator("#revoke-bulk-form input[name=lease]:checked").count() == 7
    op.select_option('select[name="reason_category"]', "misbehaving")
    op.fill('textarea[name="reason_text"]', "loops on every refund")
    summary = confirm_bulk(op, "#revoke-bulk-form button[type=submit]", "(7 matching the filter)")
    assert "7 of 7 lease(s) revoked" in summary
    assert op.locator("#bulk-outcomes tbody tr[data-ok='1']").count() == 7
    shot(op, "bulk-query-outcomes")
    assert Lease.objects.filter(holder=bad, state="revoked").count() == 7
    assert Lease.objects.filter(holder=good, state="active").count() == 3
