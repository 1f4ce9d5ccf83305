"""Hold by query and approve by query in real Chromium (issue 28, point 7): the operator
filters the live page to one agent, chooses "Hold all matching this filter", sees the count
first, confirms, and reads an outcome per lease (one held by someone else meanwhile is
reported, not held twice); the approver filters the inbox's waiting effects by kind, sees
the count, confirms, and reads an outcome per effect (one decided meanwhile is reported)."""

from __future__ import annotations

from leaseboard.core.authority import Actor
from leaseboard.core.models import Effect, Lease, WorkItem
from leaseboard.core.services import approvals, holds
from tests.builders import effect_under, leased_item, make_user, pending_refunds
from tests.e2e.pages import SIGNED_IN_BROWSER_TEST, confirm_bulk, shot, sign_in

pytestmark = SIGNED_IN_BROWSER_TEST


def test_hold_all_matching_counts_first_and_reports_each_lease(live_server, browser, agent):
    olga = make_user("olga", "operator")
    bad, _ = agent("loopy-bot")
    good, _ = agent("steady-bot")
    leases = [leased_item(bad, key=f"loop-{i}", ttl_ms=600_000) for i in range(5)]
    for i in range(2):
        leased_item(good, key=f"fine-{i}", ttl_ms=600_000)

    op = sign_in(browser, live_server.url, "olga")
    op.goto(f"{live_server.url}/?holder=loopy-bot")
    op.click("#hold-matching")
    op.wait_for_selector("#match-count")
    said = op.inner_text("#match-count")
    assert "5 agent leases not on hold match the filter (holder: loopy-bot)" in said
    assert "At most 200 are held at once" in said
    assert op.locator("#hold-bulk-form input[name=lease]:checked").count() == 5
    op.select_option('#hold-bulk-form select[name="reason_category"]', "misbehaving")
    op.fill('#hold-bulk-form textarea[name="reason_text"]', "refunds look doubled")
    # Meanwhile another operator holds one of them.
    holds.lease_hold(
        lease_id=leases[2].id,
        actor=Actor.human(make_user("sam", "operator")),
        reason_category="stuck",
        reason_text="looking at it",
    )
    summary = confirm_bulk(
        op, "#hold-bulk-form button[type=submit]", "Put 5 leases matching the filter on hold"
    )
    assert "4 of 5 lease(s) put on hold." in summary
    assert op.locator("#bulk-outcomes tbody tr[data-ok='1']").count() == 4
    refused = op.locator("#bulk-outcomes tbody tr[data-ok='0']")
    assert "loop-2" in refused.inner_text() and "already on hold" in refused.inner_text()
    shot(op, "bulk-hold-outcomes")
    assert WorkItem.objects.filter(key__startswith="loop-", held_by=olga).count() == 4
    assert not WorkItem.objects.filter(key__startswith="fine-", held_at_ms__isnull=False).exists()
    assert Lease.objects.filter(holder=bad, state="active").count() == 5  # nobody revoked


def test_approve_all_matching_counts_first_and_reports_each_effect(live_server, browser, agent):
    make_user("abe", "approver")
    other = make_user("ann", "approver")
    bot, _ = agent("refund-bot")
    refunds = pending_refunds(bot, 3, rule="money", amount_cents=1250, ttl_ms=600_000)
    void_lease = leased_item(bot, key="vd-1", ttl_ms=600_000)
    void = effect_under(void_lease, bot, "v1", kind="payment.void", target="order-9")

    ap = sign_in(browser, live_server.url, "abe")
    ap.goto(f"{live_server.url}/takeovers/pending/")
    ap.fill("#eq-kind", "payment.refund")
    ap.click("#effects-matching")
    ap.wait_for_selector("#match-count")
    said = ap.inner_text("#match-count")
    assert "3 effects waiting for approval, with a live lease, match the filter" in said
    assert "(kind: payment.refund)" in said and "At most 200 are decided at once" in said
    assert ap.locator("#effects-bulk-form input[name=effect]:checked").count() == 3
    ap.fill("#bulk-note", "small refunds, checked")
    # Meanwhile another approver decides one of them.
    approvals.effect_reject(effect_id=refunds[1].id, actor=Actor.human(other), note="no")
    summary = confirm_bulk(
        ap, "#effects-bulk-form button[value=approve]", "Authorize 3 effects matching the filter"
    )
    assert "2 of 3 effect(s) authorized." in summary
    refused = ap.locator("#bulk-outcomes tbody tr[data-ok='0']")
    assert "rf-1" in refused.inner_text() and "already_decided" in refused.inner_text()
    shot(ap, "bulk-approve-outcomes")
    decisions = {e.target: e.decision for e in Effect.objects.all()}
    assert decisions == {
        "order-0": "authorized",
        "order-1": "refused",
        "order-2": "authorized",
        "order-9": "pending_approval",  # not matched by the filter
    }
    assert Effect.objects.get(id=void.id).decision == "pending_approval"
