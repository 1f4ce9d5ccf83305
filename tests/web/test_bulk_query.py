"""Bulk by query through the dashboard (issue 28, point 7): hold, acknowledge, and approve or
reject, each counted first from the server's own evaluation of the filter, confirmed,
answered with an outcome per item; role-gated; typed input kept after an error."""

from __future__ import annotations

import pytest

from leaseboard.core.models import Alert, Effect, WorkItem
from tests.builders import leased_item, make_user, open_alerts, pending_refunds, signed_in

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


def test_hold_by_query_counts_the_filter_then_holds_the_ticked_leases(agent):
    loopy, _ = agent("loopy")
    fine, _ = agent("fine")
    leases = [leased_item(loopy, key=f"lp-{i}") for i in range(4)]
    leased_item(fine, key="ok-1")
    client = signed_in(make_user("olga", "operator"))
    live = client.get("/?holder=loopy").content.decode()
    assert 'id="hold-matching" href="/leases/hold?match=1&amp;holder=loopy"' in live
    page = client.get("/leases/hold?match=1&holder=loopy").content.decode()
    assert "<b>4</b> agent leases not on hold match the filter (holder: loopy)" in page
    assert "At most 200 are held at once" in page and "ok-1" not in page
    picked = [str(lease.id) for lease in leases[:3]]
    r = client.post(
        "/leases/hold?match=1&holder=loopy",
        {"lease": picked, "reason_category": "misbehaving", "reason_text": "loops"},
    )
    assert r.status_code == 200
    html = r.content.decode()
    assert "3 of 3 lease(s) put on hold." in html and html.count('data-ok="1"') == 3
    assert WorkItem.objects.filter(held_at_ms__isnull=False).count() == 3
    again = client.get("/leases/hold?match=1&holder=loopy").content.decode()
    assert "<b>1</b> agent lease not on hold matches" in again  # the held ones are not listed


def test_hold_by_query_keeps_what_was_typed_and_ticked_after_an_error(agent):
    loopy, _ = agent("loopy")
    leases = [leased_item(loopy, key=f"lp-{i}") for i in range(2)]
    client = signed_in(make_user("olga", "operator"))
    r = client.post(
        "/leases/hold?match=1&holder=loopy",
        {"lease": [str(leases[1].id)], "reason_category": "misbehaving", "reason_text": ""},
    )
    assert r.status_code == 400
    html = r.content.decode()
    assert '<option value="misbehaving" selected>' in html
    assert f'value="{leases[1].id}" id="pick-{leases[1].id}" checked' in html
    assert f'value="{leases[0].id}" id="pick-{leases[0].id}">' in html  # left unticked
    assert not WorkItem.objects.filter(held_at_ms__isnull=False).exists()


def test_bulk_pages_are_gated_by_their_acts(agent):
    manager = signed_in(make_user("mia", "manager"))
    assert manager.get("/leases/hold?match=1").status_code == 403
    assert manager.get("/alerts/acknowledge-matching?match=1").status_code == 403
    operator = signed_in(make_user("olga", "operator"))
    assert operator.get("/takeovers/effects/decide-matching").status_code == 403


def _alerts(agent, n: int) -> list[Alert]:  # type: ignore[no-untyped-def]
    bot, _ = agent("flaky")
    return open_alerts(bot, n)


def test_acknowledge_by_query_counts_then_reports_each_alert(agent):
    alerts = _alerts(agent, 3)
    client = signed_in(make_user("olga", "operator"))
    assert 'id="acknowledge-matching"' in client.get("/alerts/?agent=flaky").content.decode()
    page = client.get("/alerts/acknowledge-matching?match=1&agent=flaky").content.decode()
    assert "<b>3</b> open, unacknowledged alerts match the filter (agent: flaky)" in page
    bad = client.post(
        "/alerts/acknowledge-matching?match=1&agent=flaky",
        {"alert": [str(alerts[0].id)], "note": ""},
    )
    assert bad.status_code == 400
    assert f'value="{alerts[0].id}" id="pick-alert-{alerts[0].id}" checked' in bad.content.decode()
    assert "say what you are doing about it" in bad.content.decode()
    r = client.post(
        "/alerts/acknowledge-matching?match=1&agent=flaky",
        {"alert": [str(a.id) for a in alerts], "note": "restarting the pool"},
    )
    html = r.content.decode()
    assert r.status_code == 200 and "3 of 3 alert(s) acknowledged with your note." in html
    assert Alert.objects.filter(acknowledge_note="restarting the pool").count() == 3


def test_approve_by_query_counts_then_decides_each_with_its_digest(agent):
    bot, _ = agent("refund-bot")
    effects = pending_refunds(bot, 3, amount_cents=100)
    client = signed_in(make_user("abe", "approver"))
    inbox = client.get("/takeovers/pending/").content.decode()
    assert 'id="effects-query"' in inbox and "at most 200 at once" in inbox
    url = "/takeovers/effects/decide-matching?kind=payment.refund"
    page = client.get(url).content.decode()
    assert "<b>3</b> effects waiting for approval, with a live lease, match the filter" in page
    assert page.count('name="digest-') == 3
    bad = client.post(url, {"decision": "reject", "effect": [str(effects[0].id)], "note": ""})
    assert bad.status_code == 400 and "a rejection needs a note" in bad.content.decode()
    form = {"decision": "approve", "effect": [str(e.id) for e in effects], "note": "small ones"}
    form.update({f"digest-{e.id}": e.content_digest for e in effects})
    form[f"digest-{effects[2].id}"] = "f" * 64
    r = client.post(url, form)
    html = r.content.decode()
    assert r.status_code == 200 and "2 of 3 effect(s) authorized." in html
    assert "payload_mismatch" in html
    assert Effect.objects.filter(decision="authorized").count() == 2
