"""Real headless Chromium (Debian's /usr/bin/chromium) driven by Playwright's sync API.

One browser per test module (launching one costs about a second); each test gets it
through `browser` and opens its own contexts, which are closed after the test. Under
CI=true a missing Chromium fails the test; elsewhere it skips.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.builders import make_user
from tests.e2e.chromium import ARGS, CHROMIUM


@pytest.fixture(scope="module")
def _chromium():  # type: ignore[no-untyped-def]
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"chromium not found at {CHROMIUM}; install the Debian package")
        pytest.skip(f"chromium not found at {CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api")
    # Playwright's sync API keeps an event loop on this thread for the whole module; the
    # tests' (and the database fixtures') ORM calls are ordinary blocking calls, so tell
    # Django they are intended.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_api.sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                yield b
            finally:
                b.close()


@pytest.fixture
def browser(_chromium):  # type: ignore[no-untyped-def]
    from django.db import connections

    yield _chromium
    for context in list(_chromium.contexts):
        context.close()
    # Connections the test opened inside Playwright's context are not the ones
    # pytest-django closes; left open, they keep the test database from dropping.
    connections.close_all()


@pytest.fixture
def olga_and_abe(fast_passwords):  # type: ignore[no-untyped-def]
    """The people of the hold and revoke pages: olga, an operator, and abe, an approver."""
    make_user("olga", "operator")
    make_user("abe", "approver")
