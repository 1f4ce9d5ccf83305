"""Keyboard and screen-reader use of the live pages (issue 19), in real Chromium: focus and
the reading position survive polling, Tab reaches every row's actions, only a short status
line is announced, live updates can be paused, countdowns honour prefers-reduced-motion,
and a failed submit puts focus on its error summary.

Each poll below is made to answer 200 (a renewal changes the page's version between
polls), so the page really is updated while the keyboard user is on it."""

from __future__ import annotations

import pytest

from tests.builders import age_lease, leased_item, make_user
from tests.e2e.pages import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def olga(settings):  # type: ignore[no-untyped-def]
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return make_user("olga", "operator")


def _count_polls(page) -> None:  # type: ignore[no-untyped-def]
    page.evaluate(
        """window.__swaps = 0;
           document.addEventListener('htmx:afterSwap', () => { window.__swaps += 1; });"""
    )


def _wait_for_polls(page, n: int) -> None:  # type: ignore[no-untyped-def]
    # A function, not an expression: the page's CSP allows no eval of a string.
    page.wait_for_function(f"() => window.__swaps >= {n}", timeout=20_000)


def test_focus_stays_on_a_rows_link_while_three_polls_update_the_page(
    live_server, browser, agent, olga
):
    from leaseboard.core.services.leases import lease_renew

    bot, _ = agent("kb-bot")
    leases = [leased_item(bot, key=f"kb-{i}", ttl_ms=600_000) for i in range(4)]
    page = sign_in(browser, live_server.url, "olga")
    page.wait_for_selector(f"#lease-{leases[2].id}")
    link = f"#lease-{leases[2].id} td[data-label='Work key'] a"
    page.focus(link)
    _count_polls(page)
    for n in range(1, 4):
        lease_renew(lease_id=leases[n % 4].id, executor=bot, epoch=1)
        _wait_for_polls(page, n)
    assert page.evaluate(f"document.activeElement === document.querySelector({link!r})"), (
        page.evaluate("document.activeElement.outerHTML")
    )
    # Enter well after focusing still follows the link.
    page.wait_for_timeout(2500)
    page.keyboard.press("Enter")
    page.wait_for_url("**/work/kb-2")


def test_tab_reaches_every_rows_actions_in_order(live_server, browser, agent, olga):
    bot, _ = agent("tab-bot")
    leases = [leased_item(bot, key=f"tab-{i}", ttl_ms=600_000) for i in range(3)]
    page = sign_in(browser, live_server.url, "olga")
    page.wait_for_selector(f"#lease-{leases[0].id}")
    page.focus(f"#pick-{leases[0].id}")
    seen = []
    for _ in range(30):
        seen.append(
            page.evaluate(
                "(() => { const e = document.activeElement; const row = e.closest('tr');"
                " return (row ? row.id : '') + ' ' + (e.id || e.textContent.trim()); })()"
            )
        )
        page.keyboard.press("Tab")
    for lease in leases:
        mine = [s for s in seen if s.startswith(f"lease-{lease.id} ")]
        assert len(mine) == 4, seen  # pick, work key, holder, request takeover
        assert mine[0].endswith(f"pick-{lease.id}") and "Request takeover" in mine[-1]


def test_only_a_short_status_is_announced_and_updates_can_be_paused(
    live_server, browser, agent, olga
):
    bot, _ = agent("ann-bot")
    # A long TTL keeps the aged lease in jeopardy for minutes, not the default's few
    # seconds, which a loaded CI machine's polls could miss (it would then count expired).
    lease = leased_item(bot, key="ann-1", ttl_ms=600_000)
    page = sign_in(browser, live_server.url, "olga")
    page.wait_for_selector(f"#lease-{lease.id}")
    assert page.locator("#live[aria-live]").count() == 0  # the table is no live region
    age_lease(lease.id, lease.jeopardy_after_ms + 200)
    page.wait_for_function(
        "() => document.getElementById('announcer').textContent"
        ".includes('more leases in jeopardy')",
        timeout=15_000,
    )
    # Paused: no poll is sent, countdowns stand still, the button says so.
    page.click("[data-live-toggle]")
    assert page.get_attribute("[data-live-toggle]", "aria-pressed") == "true"
    page.wait_for_timeout(300)
    _count_polls(page)
    requests: list[str] = []
    page.on(
        "request", lambda r: requests.append(r.url) if r.url.rstrip("?").endswith("/") else None
    )
    before = page.inner_text(f"#lease-{lease.id} .countdown")
    page.wait_for_timeout(4500)
    assert requests == [] and page.inner_text(f"#lease-{lease.id} .countdown") == before
    page.click("[data-live-toggle]")
    assert page.get_attribute("[data-live-toggle]", "aria-pressed") == "false"
    page.wait_for_event("request", timeout=10_000)


def test_countdowns_do_not_tick_with_reduced_motion(live_server, browser, agent, olga):
    bot, _ = agent("rm-bot")
    lease = leased_item(bot, key="rm-1", ttl_ms=600_000)
    page = sign_in(browser, live_server.url, "olga", reduced_motion="reduce")
    page.wait_for_selector(f"#lease-{lease.id} .countdown")
    first = page.inner_text(f"#lease-{lease.id} .countdown")
    page.wait_for_timeout(2500)
    assert page.inner_text(f"#lease-{lease.id} .countdown") == first


def test_a_failed_submit_puts_focus_on_its_error_summary(live_server, browser, agent, olga):
    bot, _ = agent("err-bot")
    leased_item(bot, key="err-1")
    page = sign_in(browser, live_server.url, "olga")
    page.goto(f"{live_server.url}/takeovers/request/err-1")
    page.select_option("#id_reason_category", "stuck")
    page.fill("#id_reason_text", "a request for an agent that does not exist")
    page.fill("#id_agent", "ghost-bot")
    page.click("#takeover-request button[type=submit]")
    page.wait_for_selector(".error-summary")
    assert page.evaluate("document.activeElement.classList.contains('error-summary')")
    assert "no active agent named 'ghost-bot'" in page.inner_text(".error-summary")
    # What was typed is kept, to be corrected.
    assert page.input_value("#id_reason_text") == "a request for an agent that does not exist"
