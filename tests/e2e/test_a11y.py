"""Every page of every role, in real Chromium at 1440 and at 390 px wide: axe-core finds no
violation of impact serious or critical (WCAG 2.1 A/AA and best practices), no page scrolls
sideways, and a screenshot of each goes to artifacts/screenshots/pages/.

Live updates are paused (sessionStorage, as the header's button does) so a poll cannot
change the page while axe reads it."""

from __future__ import annotations

import hashlib

import pytest

from tests.e2e.a11y import AXE, AXE_SHA256, axe_violations, describe
from tests.e2e.pages import DESKTOP, PHONE, shot, sign_in
from tests.e2e.world import build_world, pages_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PAUSED = "try { sessionStorage.setItem('leaseboard.paused', '1') } catch (e) {}"


def test_the_vendored_axe_core_is_the_published_4_14_1():
    assert hashlib.sha256(AXE.read_bytes()).hexdigest() == AXE_SHA256


def _sideways(page) -> int:  # type: ignore[no-untyped-def]
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1440", "390"])
def test_every_page_of_every_role_passes_axe_and_fits_the_width(
    live_server, browser, agent, settings, viewport
):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    world = build_world(agent)
    width = viewport["width"]
    problems: list[str] = []

    login = browser.new_context(viewport=viewport).new_page()
    login.goto(f"{live_server.url}/login/")
    checks = [("anonymous", "login", login)]
    people = (("operator", "olga"), ("approver", "abe"), ("manager", "mia"), ("admin", "ada"))
    for role, username in people:
        page = sign_in(browser, live_server.url, username, viewport)
        if role == "operator" and width == DESKTOP["width"]:
            # The README's picture of the live page, as an operator sees it when signed in.
            page.wait_for_selector("#live tbody tr")
            shot(page, "readme-live", full_page=False)
        page.context.add_init_script(PAUSED)
        for name, path in pages_for(role, world):
            page.goto(f"{live_server.url}{path}")
            page.wait_for_load_state()
            checks.append((role, name, page))
            _check(problems, role, name, page, width)
    _check(problems, "anonymous", "login", login, width)
    assert not problems, "\n\n".join(problems)
    assert len(checks) > 20


def _check(problems: list[str], role: str, name: str, page, width: int) -> None:  # type: ignore[no-untyped-def]
    shot(page, f"pages/{width}-{role}-{name}")
    found = axe_violations(page)
    if found:
        problems.append(f"{role} {name} at {width} px ({page.url}):\n{describe(found)}")
    over = _sideways(page)
    if over > 0:
        problems.append(f"{role} {name} at {width} px scrolls sideways by {over} px")
