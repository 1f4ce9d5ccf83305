"""Operators at fleet scale (issue 13), in real Chromium at 1440×900 and at 390×844: alerts
grouped, filtered, acknowledged and snoozed, refreshing themselves; live rows that stay put
and ended ones that stay greyed; the approver told and deciding from a self-refreshing
inbox; takeover context and break-glass; standing that polls, warns and keeps a lapsed item;
times in the viewer's zone; charts; the managers' records; styled refusal pages, dark mode
and `/` for search. Data changes are made in the test (through services, or by moving the
stored times) and the page must show them without a reload."""

from __future__ import annotations

import pytest

from tests.builders import (
    age_lease,
    effect_rules,
    effect_under,
    grant_break_glass,
    leased_item,
    make_user,
)
from tests.e2e.pages import DESKTOP, PHONE, confirm, shot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
WIDTHS = pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1440", "390"])


@pytest.fixture
def people(settings):  # type: ignore[no-untyped-def]
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    users = {
        "olga": make_user("olga", "operator"),
        "abe": make_user("abe", "approver"),
        "mia": make_user("mia", "manager"),
    }
    grant_break_glass(users["olga"])
    return users


def _mark(page) -> None:  # type: ignore[no-untyped-def]
    page.evaluate("window.__notReloaded = true")


def _not_reloaded(page) -> bool:  # type: ignore[no-untyped-def]
    return page.evaluate("window.__notReloaded === true")


def _w(viewport: dict) -> int:
    return viewport["width"]


def _jeopardy(agent_executor, key: str):  # type: ignore[no-untyped-def]
    """A lease of `agent_executor` on a new item, moved past its jeopardy threshold, and
    the sweep's alert for it."""
    from leaseboard.sweeps.services import sweep_run

    lease = leased_item(agent_executor, key=key)
    age_lease(lease.id, lease.jeopardy_after_ms + 500)
    sweep_run()
    return lease


# -- 1. alerts -------------------------------------------------------------------------------


@WIDTHS
def test_alerts_are_grouped_filtered_acknowledged_and_snoozed(
    live_server, browser, agent, people, viewport
):
    from leaseboard.core.models import Alert, AuditEntry

    loopy, _ = agent("loopy")
    steady, _ = agent("steady")
    for i in range(3):
        _jeopardy(loopy, f"loop-{i}")
    _jeopardy(steady, "calm-1")
    page = sign_in(browser, live_server.url, "olga", viewport)
    page.goto(f"{live_server.url}/alerts/")
    group = f"#group-{loopy.id}-jeopardy"
    assert "3" in page.inner_text(f"{group} td[data-label='Alerts']")
    assert "missed its renewals" in page.inner_text(group)
    assert "expires in" not in page.inner_text(group)  # facts that stay true, no countdown
    _mark(page)

    # Changed data shows up without a reload, with how many are new.
    _jeopardy(loopy, "loop-3")
    page.wait_for_selector(f"{group} td[data-label='Alerts'] b:text-is('4')", timeout=15_000)
    page.wait_for_selector("#alerts-status b:text-is('1')")
    assert _not_reloaded(page)
    shot(page, f"alerts-1-grouped-{_w(viewport)}")

    # Filter by agent, then acknowledge the whole group with one note.
    page.fill("#alert-filters input[name=agent]", "loopy")
    page.click("#alert-filters button[type=submit]")
    assert page.locator(f"#group-{steady.id}-jeopardy").count() == 0
    page.check(f"#pick-{loopy.id}-jeopardy")
    page.fill("#ack-note", "restarting loopy")
    page.click("#alert-pick button:has-text('Acknowledge selected')")
    page.wait_for_selector(".msg-success")
    assert "4 alert(s) acknowledged" in page.inner_text(".messages")
    assert Alert.objects.filter(lease__holder=loopy, acknowledged_at_ms__isnull=True).count() == 0
    assert AuditEntry.objects.filter(action="alert.acknowledge_group").count() == 1

    # Snooze the other group: it leaves the default view and the badge.
    page.goto(f"{live_server.url}/alerts/")
    page.check(f"#pick-{steady.id}-jeopardy")
    page.fill("#ack-note", "known: steady is being redeployed")
    page.select_option("#snooze-minutes", "60")
    page.click("#alert-pick button:has-text('Snooze selected')")
    page.wait_for_selector(".msg-success")
    assert page.locator(f"#group-{steady.id}-jeopardy").count() == 0
    page.goto(f"{live_server.url}/alerts/?state=snoozed")
    assert "snoozed until" in page.inner_text(f"#group-{steady.id}-jeopardy")
    shot(page, f"alerts-2-snoozed-{_w(viewport)}")


# -- 2. live leases ----------------------------------------------------------------------


@WIDTHS
def test_live_rows_keep_their_order_and_ended_ones_stay_greyed(
    live_server, browser, agent, people, viewport
):
    from leaseboard.core.services.leases import lease_release, lease_renew

    bot, _ = agent("fleet-bot")
    leases = [leased_item(bot, key=f"k-{i:02d}", ttl_ms=600_000) for i in range(12)]
    page = sign_in(browser, live_server.url, "olga", viewport)
    page.goto(f"{live_server.url}/?size=10")
    order = page.eval_on_selector_all("#live tbody tr", "rows => rows.map(r => r.id)")
    assert len(order) == 10
    assert "Rows 1–10 of 12" in page.inner_text("#live-range")
    _mark(page)

    # Renewals change time left on every poll: rows keep their place (by work key).
    page.check('input.pick[value="k-01"]')
    for lease in leases[:5]:
        lease_renew(lease_id=lease.id, executor=bot, epoch=lease.epoch)
    page.wait_for_selector(f"#lease-{leases[0].id} td[data-label='Renewals']:text-is('1')")
    assert page.eval_on_selector_all("#live tbody tr", "rows => rows.map(r => r.id)") == order

    # A lease that ends moves to the section below, greyed, with why (collapsed until
    # opened, and open across polls once opened); its pick is dropped with a note.
    lease_release(lease_id=leases[1].id, executor=bot, epoch=1)
    ended = f"#ended-leases #lease-{leases[1].id}.ended:has-text('released by holder')"
    page.wait_for_selector(ended, state="attached")
    page.click("#ended-leases summary")
    page.wait_for_selector(ended)
    page.wait_for_selector("#bulk-pick [data-picked-note]:has-text('k-01')")
    assert not page.locator("[data-picked-count]").inner_text()
    assert _not_reloaded(page)
    shot(page, f"live-1-ended-{_w(viewport)}")

    # Sort by time left: the renewed leases (most time left) come last.
    if viewport is DESKTOP:
        page.click("#sort-due")  # the column's header
    else:
        page.select_option("#filters select[name=sort]", "due")  # cards have no header
    page.wait_for_selector("th[aria-sort='ascending'] #sort-due", state="attached")
    keys = page.eval_on_selector_all(
        "#live tbody tr:not(.ended) td[data-label='Work key']", "c => c.map(x => x.innerText)"
    )
    renewed = [i for i, k in enumerate(keys) if k in {"k-00", "k-02", "k-03", "k-04"}]
    waiting = [i for i, k in enumerate(keys) if k not in {"k-00", "k-02", "k-03", "k-04"}]
    assert renewed and waiting and max(waiting) < min(renewed), keys
    page.click("#live-next")
    page.wait_for_selector("#live-range:has-text('Rows 11–')")


# -- 3. the approver's inbox ----------------------------------------------------------------


@WIDTHS
def test_the_approver_is_told_and_decides_from_a_self_refreshing_inbox(
    live_server, browser, agent, people, viewport
):
    from leaseboard.core.authority import Actor
    from leaseboard.core.models import Queue
    from leaseboard.takeovers.models import TakeoverRequest
    from leaseboard.takeovers.services import takeover_request

    payer, _ = agent("payer")
    queue, _ = Queue.objects.get_or_create(name="payments")
    effect_rules(queue, ("payment.send", "require_approval"))
    pay = leased_item(payer, key="pay-1", queue="payments", ttl_ms=600_000)
    leased_item(payer, key="stuck-1")
    ap = sign_in(browser, live_server.url, "abe", viewport)
    ap.goto(f"{live_server.url}/alerts/")
    assert ap.inner_text("#pending-badge [aria-hidden]") == "0"
    _mark(ap)

    # A request made elsewhere shows on the badge of whatever page the approver is on.
    takeover_request(
        work_key="stuck-1",
        actor=Actor.human(people["olga"]),
        reason_category="stuck",
        reason_text="no progress for an hour",
    )
    ap.wait_for_selector("#pending-badge.badge-ask", timeout=15_000)
    ap.click("header a[href='/takeovers/pending/']")
    _mark(ap)

    # The inbox refreshes itself: an effect approval arrives with what it would pay.
    effect_under(
        pay,
        payer,
        "p1",
        kind="payment.send",
        target="invoice-9",
        payload={"amount": "980.00", "currency": "EUR", "payee": "Globex Ltd"},
    )
    row = ap.locator("tr[id^='effect-']").first
    row.wait_for(timeout=15_000)
    text = row.inner_text()
    assert "980.00" in text and "Globex Ltd" in text and "invoice-9" in text
    assert _not_reloaded(ap)
    req = TakeoverRequest.objects.get()
    assert "no progress for an hour" in ap.inner_text(f"#request-{req.id}")
    assert ap.locator(f"#request-{req.id} .countdown").count() == 1  # decide within
    shot(ap, f"inbox-1-{_w(viewport)}")

    # Both decided at once with one note.
    ap.check(f"#pick-request-{req.id}")
    ap.locator("input.pick[name=effect]").first.check()
    ap.fill("#decide-note", "checked with the payments team")
    ap.click("#decide-pick button[value=approve]")
    confirm(ap)
    ap.wait_for_selector(".msg-success:has-text('2 approved')")
    req.refresh_from_db()
    assert req.status == "approved"


# -- 4. takeover and standing ----------------------------------------------------------------


@WIDTHS
def test_the_takeover_form_shows_what_it_interrupts_and_break_glass_confirms(
    live_server, browser, agent, people, viewport
):
    from leaseboard.core.services.effects import effect_report_outcome
    from leaseboard.takeovers.models import Intervention

    bot, _ = agent("refund-bot")
    lease = leased_item(bot, key="refund-5", ttl_ms=600_000)
    fx = effect_under(lease, bot, "r5", target="order-5")
    effect_report_outcome(effect_id=fx.id, executor=bot, outcome="unknown")
    op = sign_in(browser, live_server.url, "olga", viewport)
    op.goto(f"{live_server.url}/takeovers/request/refund-5")
    context = op.inner_text(".context")
    assert "refund-bot" in context and "ACTIVE" in context
    assert "payment.refund on order-5" in context and "outcome unknown" in context
    assert op.eval_on_selector("#id_reason_category", "s => s.value") == ""  # nothing chosen
    for field in ("id_reason_category", "id_reason_text", "id_standing_minutes", "id_agent"):
        assert op.locator(f"label[for={field}]").count() == 1
    op.select_option("#id_reason_category", "incident")
    op.fill("#id_reason_text", "refunds going out twice")
    op.click("#break-glass")
    confirm(op, f"takeover-break-glass-{_w(viewport)}")
    op.wait_for_url("**/takeovers/standing/")
    assert Intervention.objects.get().break_glass


@WIDTHS
def test_standing_polls_warns_before_it_lapses_and_keeps_a_lapsed_item(
    live_server, browser, agent, people, viewport
):
    from leaseboard.core.authority import Actor
    from leaseboard.core.models import Lease
    from leaseboard.takeovers.services import takeover_break_glass, takeover_requests_expire_due

    bot, _ = agent("slow-bot")
    leased_item(bot, key="slow-1")
    iv = takeover_break_glass(
        work_key="slow-1",
        actor=Actor.human(people["olga"]),
        reason_category="stuck",
        reason_text="looping",
        standing_ms=60 * 60_000,
    )
    op = sign_in(browser, live_server.url, "olga", viewport)
    op.goto(f"{live_server.url}/takeovers/standing/")
    assert op.locator(f"#warn-{iv.id}").count() == 0
    _mark(op)

    # Less than a fifth left: a warning appears without a reload.
    age_lease(iv.lease_id, 50 * 60_000)
    op.wait_for_selector(f"#warn-{iv.id}", timeout=15_000)
    assert "lapses in" in op.inner_text(f"#warn-{iv.id}")
    shot(op, f"standing-1-warning-{_w(viewport)}")

    # It lapses: still listed, with a way to take the work over again.
    age_lease(iv.lease_id, 11 * 60_000)
    from django.db import transaction

    from leaseboard.core.clock import db_now_ms
    from leaseboard.core.services.leases import lease_expire_if_due_locked

    with transaction.atomic():
        lease_expire_if_due_locked(
            Lease.objects.select_for_update().get(id=iv.lease_id), db_now_ms()
        )
    takeover_requests_expire_due()
    op.wait_for_selector(f"#retake-{iv.id}", timeout=15_000)
    assert "lapsed" in op.inner_text(f"#standing-{iv.id}")
    assert _not_reloaded(op)
    op.click(f"#retake-{iv.id}")
    op.wait_for_url("**/takeovers/request/slow-1")


# -- 6. time -------------------------------------------------------------------------------


@WIDTHS
def test_times_are_in_the_viewers_zone_with_the_zone_named(
    live_server, browser, agent, people, viewport
):
    bot, _ = agent("tz-bot")
    leased_item(bot, key="tz-1")
    page = sign_in(browser, live_server.url, "olga", viewport, timezone_id="Asia/Tokyo")
    page.goto(f"{live_server.url}/work/tz-1")
    began = page.locator("td[data-label='Began'] time").first
    text, title, iso = (
        began.inner_text(),
        began.get_attribute("title"),
        began.get_attribute("datetime"),
    )
    assert "GMT+9" in text or "JST" in text, text  # the viewer's zone, named
    assert "Japan" in title or "GMT+09" in title or "JST" in title, title  # exact, on hover
    assert iso.endswith("+00:00")
    assert page.inner_text("[data-viewer-zone]") == "Asia/Tokyo"


# -- 7. pictures --------------------------------------------------------------------------


@WIDTHS
def test_charts_are_server_rendered_svg_with_a_range_picker(
    live_server, browser, agent, people, viewport
):
    bot, _ = agent("chart-bot")
    for i in range(3):
        leased_item(bot, key=f"c-{i}")
    _jeopardy(bot, "c-j")
    op = sign_in(browser, live_server.url, "olga", viewport)
    op.goto(f"{live_server.url}/fleet/")
    assert op.locator("#chart-live svg path.line").count() == 1
    assert op.locator("#chart-changes svg rect").count() >= 1
    assert op.locator("#chart-gaps svg rect").count() >= 1
    assert "jeopardy" in op.locator("#chart-changes desc").text_content()
    op.click("text=24 hours")
    op.wait_for_url("**range=24h")
    shot(op, f"charts-fleet-{_w(viewport)}")
    assert op.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


# -- 8. managers --------------------------------------------------------------------------


@WIDTHS
def test_managers_see_break_glass_without_an_approver_and_a_named_audit_log(
    live_server, browser, agent, people, viewport
):
    from leaseboard.core.authority import Actor
    from leaseboard.core.services.leases import lease_release
    from leaseboard.takeovers.services import (
        takeover_approve,
        takeover_break_glass,
        takeover_request,
    )

    bot, _ = agent("old-bot")
    gone = leased_item(bot, key="gone-1")
    lease_release(lease_id=gone.id, executor=bot, epoch=1)  # no live lease when asked
    req = takeover_request(
        work_key="gone-1",
        actor=Actor.human(people["olga"]),
        reason_category="stuck",
        reason_text="left half done",
    )
    iv = takeover_approve(request_pk=req.id, actor=Actor.human(people["abe"]))
    leased_item(bot, key="burn-1")
    # deliberate: a break-glass act, one keyword a line, as the standing test's own above.
    bg = takeover_break_glass(
        work_key="burn-1",
        actor=Actor.human(people["olga"]),
        reason_category="incident",
        reason_text="on fire",
    )
    mg = sign_in(browser, live_server.url, "mia", viewport)
    mg.goto(f"{live_server.url}/takeovers/interventions/")
    assert "none (break-glass)" in mg.inner_text(f"#intervention-{bg.id}")
    assert "Break-glass review queue (1)" in mg.inner_text("#review-queue")
    mg.goto(f"{live_server.url}/takeovers/interventions/{iv.id}")
    assert "old-bot" in mg.inner_text(".facts")  # the last agent, though its lease had ended
    mg.goto(f"{live_server.url}/takeovers/interventions/summary")
    assert "1 waiting for review" in mg.inner_text("main")
    mg.goto(f"{live_server.url}/audit/?actor=olga")
    rows = mg.locator("table.audit tbody tr")
    assert rows.count() >= 2
    assert all("olga" == r for r in rows.locator("td[data-label='Actor']").all_inner_texts())
    mg.goto(f"{live_server.url}/audit/?action=agent.")
    assert "old-bot" in mg.inner_text("table.audit")  # a name, not "executor 3"
    shot(mg, f"audit-{_w(viewport)}")


# -- 9. refusal pages, dark mode, "/" ----------------------------------------------------


@WIDTHS
def test_refusal_pages_sit_in_the_layout_dark_mode_follows_the_system_and_slash_searches(
    live_server, browser, agent, people, viewport
):
    op = sign_in(browser, live_server.url, "olga", viewport)
    response = op.goto(f"{live_server.url}/audit/")
    assert response.status == 403
    assert "needs the role manager" in op.inner_text("main")
    assert op.locator("nav[aria-label=Main]").count() == 1  # inside the site's layout
    response = op.goto(f"{live_server.url}/work/nothing-here")
    assert response.status == 404 and "Not found" in op.inner_text("h1")
    op.goto(f"{live_server.url}/alerts/")
    op.keyboard.press("/")
    assert op.evaluate("document.activeElement.id") == "site-search"
    op.keyboard.type("refund")
    op.keyboard.press("Enter")
    op.wait_for_url("**/?q=refund")
    op.emulate_media(color_scheme="dark")
    dark = op.evaluate("getComputedStyle(document.body).backgroundColor")
    op.emulate_media(color_scheme="light")
    light = op.evaluate("getComputedStyle(document.body).backgroundColor")
    assert dark != light and dark == "rgb(13, 17, 23)"
    op.emulate_media(color_scheme="dark")
    shot(op, f"dark-live-{_w(viewport)}")
