"""What the browser tests share: signing in, screenshots into artifacts/, and an agent's
call to the live server's API (the agent's side of what a person did in the browser)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.builders import PASSWORD
from tests.e2e.chromium import SHOTS

DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}

# The marks of a browser test whose people sign in with passwords (hashed fast: MD5).
SIGNED_IN_BROWSER_TEST = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fast_passwords"),
]


def sign_in(
    browser: Any, base: str, username: str, viewport: dict | None = None, **options: Any
) -> Any:
    """A new browser context signed in as `username` (`options` are the context's own:
    timezone_id, reduced_motion, ...); returns its page."""
    context = browser.new_context(viewport=viewport or DESKTOP, accept_downloads=True, **options)
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


def agent_renew(base: str, lease: Any, token: str) -> tuple[int, dict]:
    """The agent renews `lease` at its epoch: (status, problem or answer)."""
    return agent_call(base, f"/api/v1/leases/{lease.id}/renew", token, {"epoch": lease.epoch})


def confirm(page: Any, name: str = "") -> None:
    """Answer the confirmation dialog of a risky action (screenshot first if `name`)."""
    dialog = page.locator("dialog#confirm-dialog[open]")
    dialog.wait_for()
    if name:
        shot(page, name, full_page=False)
    dialog.locator("[data-ok]").click()


def confirm_bulk(page: Any, submit: str, asked: str) -> str:
    """Submit a bulk form by its button `submit`, check the confirmation dialog asks
    `asked`, confirm, and return the text of the summary that answers."""
    page.click(submit)
    dialog = page.locator("dialog#confirm-dialog[open]")
    dialog.wait_for()
    assert asked in dialog.inner_text()
    confirm(page)
    page.wait_for_selector("#bulk-summary")
    return str(page.inner_text("#bulk-summary"))
