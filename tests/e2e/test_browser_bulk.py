"""Several leases picked on the live page for one bulk takeover, in real Chromium: the
selection and the rows' takeover links survive the page's polling."""

from __future__ import annotations

import pytest

from tests.builders import PASSWORD, leased_item, make_user
from tests.e2e.chromium import SHOTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_selection_survives_polling_and_fills_the_bulk_form(live_server, browser, agent):
    from leaseboard.core.services.leases import lease_renew

    SHOTS.mkdir(parents=True, exist_ok=True)
    make_user("otto", "operator")
    holder, _ = agent("bulk-agent")
    leases = [leased_item(holder, key=f"bulk-{i}", ttl_ms=600_000) for i in range(3)]

    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.set_default_timeout(10_000)
    page.goto(f"{live_server.url}/login/")
    page.fill('input[name="username"]', "otto")
    page.fill('input[name="password"]', PASSWORD)
    page.click('button[type="submit"]')
    page.wait_for_selector(f"#lease-{leases[0].id}")
    page.check('input.pick[value="bulk-0"]')
    page.check('input.pick[value="bulk-2"]')
    assert page.inner_text("[data-picked-count]") == "2 selected"

    # A renewal changes the page's version, so the next poll replaces every row.
    lease_renew(lease_id=leases[1].id, executor=holder, epoch=leases[1].epoch)
    page.wait_for_selector(f"#lease-{leases[1].id} td:nth-child(8):text-is('1')", timeout=12_000)
    assert page.is_checked('input.pick[value="bulk-0"]')
    assert not page.is_checked('input.pick[value="bulk-1"]')
    assert page.is_checked('input.pick[value="bulk-2"]')
    assert page.locator(f"#lease-{leases[1].id} a.takeover-link").count() == 1
    page.screenshot(path=str(SHOTS / "bulk-1-picked.png"), full_page=True)

    page.click("#bulk-pick button:not(.danger)")
    page.wait_for_url("**/takeovers/bulk**")
    keys = page.input_value('textarea[name="work_keys"]').split()
    assert sorted(keys) == ["bulk-0", "bulk-2"]
    page.screenshot(path=str(SHOTS / "bulk-2-form.png"), full_page=True)
