"""What the browser tests share: signing in, screenshots into artifacts/, and an agent's
call to the live server's API (the agent's side of what a person did in the browser)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from tests.builders import PASSWORD
from tests.e2e.chromium import SHOTS

DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}


def sign_in(browser: Any, base: str, username: str, viewport: dict | None = None) -> Any:
    """A new browser context signed in as `username`; returns its page."""
    context = browser.new_context(viewport=viewport or DESKTOP, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.goto(f"{base}/login/")
    page.fill('input[name="username"]', username)
    page.fill('input[name="password"]', PASSWORD)
    page.click('button[type="submit"]')
    page.wait_for_load_state()
    return page


def shot(page: Any, name: str, *, full_page: bool = True) -> None:
    path = SHOTS / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=full_page)


def agent_call(base: str, path: str, token: str, body: dict | None = None) -> tuple[int, dict]:
    """POST (or GET without a body) to the API as an agent: (status, problem or answer)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"{base}{path}",
        data=data,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST" if data is not None else "GET",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def confirm(page: Any, name: str = "") -> None:
    """Answer the confirmation dialog of a risky action (screenshot first if `name`)."""
    dialog = page.locator("dialog#confirm-dialog[open]")
    dialog.wait_for()
    if name:
        shot(page, name, full_page=False)
    dialog.locator("[data-ok]").click()
