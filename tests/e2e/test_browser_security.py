"""The dashboard and the API docs under the Content-Security-Policy in real Chromium: no
violation reported while signing in, polling and reading the docs; and the sign-in lock-out
as a person sees it. Screenshots go to artifacts/screenshots/."""

from __future__ import annotations

import pytest

from tests.builders import PASSWORD, leased_item, make_user
from tests.e2e.chromium import SHOTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIOLATIONS_JS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__cspViolations.push(e.violatedDirective + " " + e.blockedURI);
});
"""


HIDE_JS = """
window.__visibility = "hidden";
Object.defineProperty(document, "visibilityState", {
  configurable: true, get: () => window.__visibility,
});
window.__polls = 0;
document.addEventListener("htmx:beforeRequest", function (e) {
  if (e.detail.elt.id === "live") window.__polls++;
});
document.dispatchEvent(new Event("visibilitychange"));
"""
SHOW_JS = """
window.__visibility = "visible";
document.dispatchEvent(new Event("visibilitychange"));
"""


def _watch(page):  # type: ignore[no-untyped-def]
    """Collect CSP violations two ways: the DOM event and Chromium's console report."""
    console: list[str] = []
    page.on(
        "console",
        lambda msg: console.append(msg.text) if "Content Security Policy" in msg.text else None,
    )
    page.add_init_script(VIOLATIONS_JS)
    return console


def test_the_dashboard_and_api_docs_run_under_the_csp_without_a_violation(
    live_server, browser, agent
):
    SHOTS.mkdir(parents=True, exist_ok=True)
    make_user("olivia", "operator")
    holder, _ = agent("agent-csp")
    lease = leased_item(holder, key="csp-1")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.set_default_timeout(10_000)
    console = _watch(page)

    response = page.goto(f"{live_server.url}/login/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.fill('input[name="username"]', "olivia")
    page.fill('input[name="password"]', PASSWORD)
    page.click('button[type="submit"]')
    page.wait_for_selector(f"#lease-{lease.id}")
    # htmx polls the live region (the visibility check now lives in leaseboard.js).
    with page.expect_response(lambda r: r.request.headers.get("hx-request") == "true") as poll:
        pass  # waits for the next poll
    assert poll.value.status in (200, 304)
    assert page.evaluate("window.__cspViolations") == []

    # A hidden tab does not poll (neither the timer nor the visibilitychange trigger); it
    # polls again as soon as it is visible.
    page.evaluate(HIDE_JS)
    page.wait_for_timeout(2_500)  # a full poll period passes with no request
    assert page.evaluate("window.__polls") == 0
    page.evaluate(SHOW_JS)
    page.wait_for_function("window.__polls > 0")

    page.goto(f"{live_server.url}/api/v1/docs")
    page.wait_for_selector(".swagger-ui .info .title")
    assert "Leaseboard API" in page.inner_text(".swagger-ui .info .title")
    page.wait_for_selector(".opblock")  # the operations rendered from openapi.json
    page.screenshot(path=str(SHOTS / "csp-api-docs.png"), full_page=False)
    assert page.evaluate("window.__cspViolations") == []
    assert console == []


def test_a_person_locked_out_of_sign_in_sees_why_and_for_how_long(live_server, browser, settings):
    settings.AXES_FAILURE_LIMIT = 3
    make_user("olga", "operator")
    page = browser.new_page(viewport={"width": 1000, "height": 600})
    page.set_default_timeout(10_000)
    page.goto(f"{live_server.url}/login/")
    for attempt in range(3):
        page.fill('input[name="username"]', "olga")
        page.fill('input[name="password"]', f"wrong-{attempt}")
        page.click('button[type="submit"]')
        page.wait_for_load_state()
        if attempt < 2:
            assert page.is_visible(".signin .error")
    text = page.inner_text("main")
    assert "Too many failed sign-ins" in text and "15 minutes" in text
    page.screenshot(path=str(SHOTS / "signin-locked-out.png"))
    # The right password now changes nothing until the cool-off ends.
    page.click("text=try again")
    page.fill('input[name="username"]', "olga")
    page.fill('input[name="password"]', PASSWORD)
    page.click('button[type="submit"]')
    page.wait_for_load_state()
    assert "Too many failed sign-ins" in page.inner_text("main")
