"""The operator's path in real headless Chromium (Debian's /usr/bin/chromium driven by
Playwright): sign in, watch a lease go to jeopardy and then expire without reloading,
acknowledge its alert, open the work item and find the refused stale effect.

Time moves by aging the lease's stored database-clock times in SQL; the page must notice
by polling. Screenshots go to artifacts/screenshots/ (a CI artifact, not committed).
"""

from __future__ import annotations

import pytest

from tests.builders import PASSWORD, age_lease, effect_under, leased_item, make_user
from tests.e2e.chromium import SHOTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _materialize() -> str:
    """Let the sweep write down what time decided, if the sweeps app is there; the page
    computes certainty from time either way."""
    try:
        from leaseboard.sweeps.services import sweep_run
    except ImportError:  # sweeps not built yet: end the lease with the core service
        return _expire_with_core_service()
    sweep_run()
    return "sweep"


def _expire_with_core_service() -> str:
    from django.db import transaction

    from leaseboard.core.clock import db_now_ms
    from leaseboard.core.models import Lease
    from leaseboard.core.services.leases import lease_expire_if_due_locked

    with transaction.atomic():
        now = db_now_ms()
        for lease in Lease.objects.select_for_update().filter(state__in=["active", "jeopardy"]):
            lease_expire_if_due_locked(lease, now)
    return "core"


def test_operator_watches_a_lease_fail_acknowledges_and_finds_the_stale_effect(
    live_server, browser, agent
):
    from leaseboard.core.models import Alert, AuditEntry
    from leaseboard.core.services.leases import lease_acquire, lease_renew
    from leaseboard.domain.errors import StaleEpoch

    SHOTS.mkdir(parents=True, exist_ok=True)
    make_user("olivia", "operator")
    old_holder, _ = agent("agent-old")
    new_holder, _ = agent("agent-new")
    lease = leased_item(old_holder, key="refund-order-42")
    row = f"#lease-{lease.id}"

    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.set_default_timeout(10_000)
    page.goto(f"{live_server.url}/")
    assert "/login/" in page.url
    page.fill('input[name="username"]', "olivia")
    page.fill('input[name="password"]', PASSWORD)
    page.click('button[type="submit"]')
    page.wait_for_selector(f'{row}[data-certainty="active"]')
    assert page.inner_text(f"{row} .cert") == "● ACTIVE"
    page.evaluate("window.__notReloaded = true")
    page.screenshot(path=str(SHOTS / "1-active.png"), full_page=True)

    # The holder misses its renewals: time passes the jeopardy threshold. (A renewal first,
    # so the times are counted from now whatever the sign-in took on a busy machine.)
    lease_renew(lease_id=lease.id, executor=old_holder, epoch=lease.epoch)
    age_lease(lease.id, lease.jeopardy_after_ms + 200)
    page.wait_for_selector(f'{row}[data-certainty="jeopardy"]')
    assert "JEOPARDY" in page.inner_text(f"{row} .cert")
    how = _materialize()  # the sweep opens the jeopardy alert
    page.wait_for_selector("#alert-badge.badge-hot", timeout=12_000) if how == "sweep" else None
    page.screenshot(path=str(SHOTS / "2-jeopardy.png"), full_page=True)

    # ...and then its ttl: expired, shown from time before any sweep writes it down.
    age_lease(lease.id, lease.ttl_ms)
    page.wait_for_selector(f'{row}[data-certainty="expired"]')
    assert "EXPIRED" in page.inner_text(f"{row} .cert")
    assert page.evaluate("window.__notReloaded") is True
    page.screenshot(path=str(SHOTS / "3-expired.png"), full_page=True)
    _materialize()
    # Written down as expired, it moves to the section of leases that just ended (collapsed:
    # live work comes first), greyed, saying why it ended; opened, it stays open.
    page.wait_for_selector(f'#ended-leases {row}.ended:has-text("ttl elapsed")', state="attached")
    page.click("#ended-leases summary")
    page.wait_for_selector(f'#ended-leases {row}.ended:has-text("ttl elapsed")')
    page.wait_for_selector('[data-counter="expired"]:text-is("1")')
    assert page.evaluate("window.__notReloaded") is True

    # A new holder gets the work at epoch 2; the old one tries an effect at epoch 1.
    lease_acquire(work_key="refund-order-42", executor=new_holder)
    with pytest.raises(StaleEpoch):
        effect_under(lease, old_holder, "refund-1", kind="payment.refund", target="order-42")

    # Acknowledge the lease's open alert (the sweep's expiry alert, else the stale effect's).
    alert = (
        Alert.objects.filter(lease=lease, resolved_at_ms__isnull=True)
        .order_by("opened_at_ms", "id")
        .first()
    )
    assert alert is not None
    page.click('header a[href="/alerts/"]')
    page.click("text=one by one")
    alert_row = f"#alert-{alert.id}"
    page.fill(f'{alert_row} input[name="note"]', "agent-old is wedged; restarting it")
    page.click(f'{alert_row} button[type="submit"]')
    page.wait_for_selector(f"{alert_row} .acked")
    assert "acknowledged by olivia" in page.inner_text(f"{alert_row} .acked")
    page.screenshot(path=str(SHOTS / "4-acknowledged.png"), full_page=True)
    entry = AuditEntry.objects.get(action="alert.acknowledge")
    assert (entry.actor_name, entry.actor_role) == ("olivia", "operator")
    assert entry.reason == "agent-old is wedged; restarting it" and entry.request_id

    # Open the work item from the alert and find the refused stale effect.
    page.click(f'{alert_row} a[href^="/work/"]')
    page.wait_for_selector("tr.stale")
    text = page.inner_text("tr.stale")
    assert "epoch 1 tried, current 2" in text and "stale_epoch" in text
    assert "agent-old" in text
    page.screenshot(path=str(SHOTS / "5-work-item.png"), full_page=True)
