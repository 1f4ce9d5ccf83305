"""Live first in real Chromium (issue 28, point 3): after 60 leases ended a moment ago and
with 40 healthy ones, a live lease on hold and one in jeopardy, whose keys sort last, are
the first rows on the first screen; the ended ones wait in their own collapsed section."""

from __future__ import annotations

import pytest
from django.db import connection

from leaseboard.core.authority import Actor
from leaseboard.core.clock import now_ms_sql
from leaseboard.core.services.holds import lease_hold
from tests.builders import age_lease, bulk_leases, leased_item, make_user
from tests.e2e.pages import DESKTOP, shot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_live_lease_on_hold_is_on_the_first_screen_after_60_ended_ones(
    live_server, browser, agent, settings
):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    olga = make_user("olga", "operator")
    bot, _ = agent("fleet-bot")
    bulk_leases(60, prefix="done-", holder=bot, jeopardy_in_ms=600_000, expires_in_ms=900_000)
    with connection.cursor() as cur:  # all 60 released a moment ago
        cur.execute(
            f"UPDATE core_lease SET state = 'released', ended_at_ms = {now_ms_sql()}, "
            "end_reason = 'released by holder' WHERE work_item_id IN "
            "(SELECT id FROM core_workitem WHERE key LIKE 'done-%%')"
        )
    bulk_leases(40, prefix="ok-", holder=bot, jeopardy_in_ms=600_000, expires_in_ms=900_000)
    held = leased_item(bot, key="zz-held", ttl_ms=600_000)
    lease_hold(
        lease_id=held.id,
        actor=Actor.human(olga),
        reason_category="misbehaving",
        reason_text="refunds doubled",
    )
    late = leased_item(bot, key="zz-late", ttl_ms=600_000)
    age_lease(late.id, late.jeopardy_after_ms + 1_000)

    page = sign_in(browser, live_server.url, "olga", DESKTOP)
    page.wait_for_selector("#live tbody tr")
    first = page.eval_on_selector_all(
        "#live > table tbody tr", "rows => rows.slice(0, 2).map(r => r.id)"
    )
    assert first == [f"lease-{late.id}", f"lease-{held.id}"]  # jeopardy, then on hold
    box = page.locator(f"#lease-{held.id}").bounding_box()
    assert box is not None and box["y"] + box["height"] <= DESKTOP["height"]  # first screen
    assert page.locator(f"#lease-{held.id} [data-on-hold]").is_visible()
    ended = page.locator("#ended-leases")
    assert ended.get_attribute("open") is None  # collapsed
    assert "20 leases ended in the last moments" in ended.locator("summary").inner_text()
    assert page.locator("#ended-leases tbody tr").count() == 20
    assert "of 42" in page.inner_text("#live-range")  # live leases only
    shot(page, "live-first-1440", full_page=False)
