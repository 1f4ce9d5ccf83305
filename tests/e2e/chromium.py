"""Where Debian's Chromium is, how it is launched, and where screenshots go.

Never `playwright install`: the browser comes from the distribution. The `browser` fixture
is in tests/e2e/conftest.py.
"""

from __future__ import annotations

import os
from pathlib import Path

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
