"""Refresh the screenshots in docs/ of each role's main page, at 1440 and 390 px wide, from a
running demo (`python3 dev.py demo` in another terminal, with demo-like data), in Debian's
Chromium through Playwright (never `playwright install`):

    .venv/bin/python docs/screenshots.py [--base-url http://127.0.0.1:8000]

Signs in with the demo's sign-ins (LEASEBOARD_DATA_DIR/demo/users.json, default ./var),
pauses live updates so a poll cannot change a page mid-shot, and writes
docs/<role>-<width>.png. Exits 1, naming the page, if any page scrolls sideways.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
# (role, its main page, what the page is): the page each role lands on to do its job.
PAGES = (
    ("operator", "/", "live leases"),
    ("approver", "/takeovers/pending/", "approvals inbox"),
    ("manager", "/takeovers/interventions/", "interventions"),
    ("admin", "/settings/people/", "settings: people"),
)
WIDTHS = {1440: 900, 390: 844}
PAUSED = "try { sessionStorage.setItem('leaseboard.paused', '1') } catch (e) {}"


def sign_ins() -> dict[str, tuple[str, str]]:
    """{role: (username, password)} from the demo's users file."""
    data_dir = Path(os.environ.get("LEASEBOARD_DATA_DIR") or ROOT / "var")
    users = json.loads((data_dir / "demo" / "users.json").read_text())
    return {name.removeprefix("demo-"): (name, password) for name, password in users.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", default=f"http://127.0.0.1:{os.environ.get('PORT', '8000')}")
    base = parser.parse_args().base_url.rstrip("/")
    people = sign_ins()
    problems = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        for role, path, what in PAGES:
            username, password = people[role]
            for width, height in WIDTHS.items():
                context = browser.new_context(viewport={"width": width, "height": height})
                context.add_init_script(PAUSED)
                page = context.new_page()
                page.goto(f"{base}/login/")
                page.fill('input[name="username"]', username)
                page.fill('input[name="password"]', password)
                page.click('button[type="submit"]')
                page.wait_for_load_state()
                page.goto(f"{base}{path}")
                page.wait_for_load_state("networkidle")
                out = ROOT / "docs" / f"{role}-{width}.png"
                page.screenshot(path=str(out), full_page=False)
                over = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
                if over > 0:
                    problems.append(f"{role}'s {what} ({path}) at {width} px: {over} px sideways")
                print(f"{out.relative_to(ROOT)}: {role}'s {what} at {width} px")
                context.close()
        browser.close()
    for problem in problems:
        print(f"scrolls sideways: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
