"""Two people in real headless Chromium: an operator requests a takeover, an approver
approves, the operator reconciles an `unknown` effect and hands back, and a manager finds
the intervention record with every step and exports it. Screenshots go to
artifacts/screenshots/ (gitignored)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from tests.builders import effect_under, leased_item, make_user
from tests.e2e.chromium import SHOTS
from tests.e2e.pages import SIGNED_IN_BROWSER_TEST, confirm, sign_in

pytestmark = SIGNED_IN_BROWSER_TEST


def test_two_people_take_over_reconcile_hand_back_and_a_manager_exports(
    live_server, browser, agent
):
    from leaseboard.core.models import Effect, Lease
    from leaseboard.core.services.effects import effect_report_outcome
    from leaseboard.takeovers.models import Intervention, TakeoverRequest

    SHOTS.mkdir(parents=True, exist_ok=True)
    make_user("oscar", "operator")
    make_user("ada", "approver")
    make_user("max", "manager")
    executor, _ = agent("refund-bot")
    lease = leased_item(executor, key="refund-77")
    effect = effect_under(lease, executor, "r77", kind="payment.refund", target="order-77")
    effect_report_outcome(effect_id=effect.id, executor=executor, outcome="unknown")
    base = live_server.url

    # The operator asks from the work item page.
    op = sign_in(browser, base, "oscar")
    op.goto(f"{base}/work/refund-77")
    op.click("text=Request takeover")
    op.select_option('select[name="reason_category"]', "unknown_outcome")
    op.fill('textarea[name="reason_text"]', "refund outcome unknown; agent keeps retrying")
    op.fill('input[name="standing_minutes"]', "20")
    op.screenshot(path=str(SHOTS / "takeover-1-request.png"))
    op.click("#takeover-request button[type=submit]")
    assert "waiting for an approver" in op.content()

    # The approver approves from the pending queue.
    ap = sign_in(browser, base, "ada")
    ap.goto(f"{base}/takeovers/pending/")
    assert "refund-77" in ap.content()
    ap.check(f"#pick-request-{TakeoverRequest.objects.get().id}")
    ap.fill("#decide-note", "go ahead")
    ap.screenshot(path=str(SHOTS / "takeover-2-pending.png"))
    ap.click('#decide-pick button[value="approve"]')
    confirm(ap)
    assert "approved" in ap.content()
    assert Lease.objects.get(id=lease.id).state == "revoked"

    # The operator sees a ticking countdown, reconciles the unknown effect, hands back.
    op.goto(f"{base}/takeovers/standing/")
    countdown = op.locator(".countdown").first
    first = countdown.inner_text()
    op.wait_for_timeout(2100)
    assert countdown.inner_text() != first, "the countdown does not tick"
    op.select_option(f'form[data-effect="{effect.id}"] select', "not_applied")
    op.fill(f'form[data-effect="{effect.id}"] input[name="note"]', "no refund in the ledger")
    op.screenshot(path=str(SHOTS / "takeover-3-standing.png"))
    op.click(f'form[data-effect="{effect.id}"] button')
    assert "Effect reconciled." in op.content()
    op.fill('form.hand-back input[name="note"]', "safe for the agents again")
    op.click("form.hand-back button")
    op.locator("dialog#confirm-dialog[open] [data-ok]").click()  # hand back confirms first
    assert "Handed back" in op.content()
    assert Effect.objects.get(id=effect.id).resolution == "not_applied"
    iv = Intervention.objects.get()
    assert iv.outcome == "handed_back"

    # The manager finds the record with every step and exports it.
    mg = sign_in(browser, base, "max")
    mg.goto(f"{base}/takeovers/interventions/?agent=refund-bot&reason=unknown_outcome")
    mg.click(f"#intervention-{iv.id} a")
    timeline = mg.locator("#timeline").inner_text()
    for step in ("requested", "approved", "revoked", "granted", "effect reconciled", "handed back"):
        assert step in timeline, step
    mg.screenshot(path=str(SHOTS / "takeover-4-record.png"), full_page=True)
    mg.goto(f"{base}/takeovers/interventions/")
    with mg.expect_download() as info:
        mg.click("#export-csv")
    text = Path(info.value.path()).read_text()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["work_key"], r["requested_by"], r["approved_by"], r["outcome"]) for r in rows] == [
        ("refund-77", "oscar", "ada", "handed_back")
    ]
