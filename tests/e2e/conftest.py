"""Real headless Chromium (Debian's /usr/bin/chromium) driven by Playwright's sync API.

Under CI=true a missing Chromium fails the test; elsewhere it skips.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.chromium import ARGS, CHROMIUM


@pytest.fixture
def browser(monkeypatch):  # type: ignore[no-untyped-def]
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"chromium not found at {CHROMIUM}; install the Debian package")
        pytest.skip(f"chromium not found at {CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api")
    from django.db import connections

    # Playwright's sync API keeps an event loop on this thread; the test's own ORM calls
    # are ordinary blocking calls, so tell Django they are intended.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()
            # Connections the test opened inside Playwright's context are not the ones
            # pytest-django closes; left open, they keep the test database from dropping.
            connections.close_all()
