"""An admin configures a queue in real headless Chromium: capacity 2 and a rule
"payment.* where payload.amount_cents > 50000 -> require approval". Then an agent (over
HTTP, as agents do) finds its third admission waiting, an effect of 60000 goes to the
approver and one of 40000 is authorized; the explain page names the rule, and the
history shows each change with before -> after. Screenshots go to artifacts/screenshots/.
"""

from __future__ import annotations

import httpx

from tests.builders import make_user
from tests.e2e.chromium import SHOTS
from tests.e2e.pages import SIGNED_IN_BROWSER_TEST, sign_in

pytestmark = SIGNED_IN_BROWSER_TEST


def test_an_admin_configures_a_queue_and_a_rule_that_decides_effects(live_server, browser, agent):
    from leaseboard.core.models import EffectRule, Queue

    SHOTS.mkdir(parents=True, exist_ok=True)
    make_user("ada", "admin")
    make_user("abe", "approver")
    _, token = agent("pay-bot")
    base = live_server.url

    # The admin creates the queue from the Settings link in the header.
    ad = sign_in(browser, base, "ada")
    ad.click("header nav >> text=Settings")
    ad.click("text=New queue")
    ad.fill('input[name="name"]', "payments")
    ad.fill('input[name="capacity"]', "2")
    ad.click("#queue-form button[type=submit]")
    assert "Queue payments created." in ad.content()

    # A bad condition is a field error and saves nothing; then the rule as meant.
    ad.click("#add-rule")
    ad.fill('input[name="name"]', "big-payments")
    ad.fill('input[name="kind"]', "payment.*")
    ad.fill('textarea[name="when"]', "payload.amount_cents >")
    ad.select_option('select[name="decision"]', "require_approval")
    ad.click("#rule-form button[type=submit]")
    error = ad.locator('.field-error[data-field="when"]').inner_text()
    assert "line 1, column 23: the condition ends too early" in error
    assert not EffectRule.objects.exists()
    ad.screenshot(path=str(SHOTS / "settings-1-rule-error.png"), full_page=True)
    ad.fill('textarea[name="when"]', "payload.amount_cents > 50000")
    ad.click("#rule-form button[type=submit]")
    assert ad.locator("#rule-big-payments").count() == 1
    ad.screenshot(path=str(SHOTS / "settings-2-queue.png"), full_page=True)
    assert Queue.objects.get(name="payments").capacity == 2

    # The agent: the third admission waits; 60000 waits for an approver, 40000 passes.
    with httpx.Client(base_url=f"{base}/api/v1", headers={"Authorization": f"Bearer {token}"}) as h:
        admissions = [
            h.post("/work-items", json={"key": f"pay-{i}", "queue": "payments"}).json()
            for i in (1, 2, 3)
        ]
        assert [a["admission"] for a in admissions] == ["admitted", "admitted", "waiting"]
        lease = h.post("/work-items/pay-1/lease", json={}).json()
        fx = {"lease_id": lease["lease_id"], "epoch": lease["epoch"], "kind": "payment.refund"}

        def refund(key: str, target: str, amount_cents: int) -> httpx.Response:
            body = {**fx, "target": target, "idempotency_key": key}
            return h.post("/effects", json={**body, "payload": {"amount_cents": amount_cents}})

        big = refund("big", "order-600", 60000)
        small = refund("small", "order-400", 40000)
    assert (big.status_code, big.json()["decision"], big.json()["rule"]) == (
        202,
        "pending_approval",
        "big-payments",
    )
    assert (small.status_code, small.json()["decision"]) == (201, "authorized")

    # The approver finds the 60000 effect waiting, and not the 40000 one.
    ap = sign_in(browser, base, "abe")
    ap.goto(f"{base}/takeovers/pending/")
    pending = ap.locator(f"#effect-{big.json()['effect_id']}").inner_text()
    assert "order-600" in pending
    assert ap.locator(f"#effect-{small.json()['effect_id']}").count() == 0

    # The explain page names the rule, step by step.
    # deliberate: a form filled field by field, as the rule form above (alike in shape only).
    ad.click(".settings-nav >> text=Explain")
    ad.select_option('select[name="queue"]', "payments")
    ad.fill('input[name="kind"]', "payment.refund")
    ad.fill('input[name="target"]', "order-600")
    ad.fill('textarea[name="payload"]', '{"amount_cents": 60000}')
    ad.click("#explain-form button[type=submit]")
    assert ad.locator("#deciding-rule").inner_text() == "big-payments"
    assert "require_approval" in ad.locator("#explanation").inner_text()
    ad.screenshot(path=str(SHOTS / "settings-3-explain.png"), full_page=True)

    # The history: each change as the fields it added, removed or changed (the recorded
    # before -> after JSON one click away).
    ad.click(".settings-nav >> text=History")
    rows = ad.locator("#history tbody tr")
    texts = [rows.nth(i).inner_text() for i in range(rows.count())]
    rule_change = next(t for t in texts if "policy.rules_change" in t)
    assert '+ added rules[0].name: "big-payments"' in rule_change
    assert '+ added rules[0].when: "payload.amount_cents > 50000"' in rule_change
    queue_create = next(t for t in texts if "queue.create" in t)
    assert "+ added capacity: 2" in queue_create
    row = rows.filter(has_text="policy.rules_change").first
    row.locator("summary", has_text="recorded JSON").click()
    assert '"rules": []' in row.inner_text()
    ad.screenshot(path=str(SHOTS / "settings-4-history.png"), full_page=True)
