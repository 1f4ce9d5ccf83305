"""The dashboard shows the fence: after a revoke with an effect still open, the work item
page says how long the item is fenced for; a recipient's repeated refusals are one alert
with its count."""

from __future__ import annotations

import re

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import Lease, Queue
from leaseboard.core.services.recipients import recipient_report_record
from tests.builders import effect_under, leased_item, make_user

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_the_work_item_page_says_how_long_it_is_fenced_for(client, agent):
    Queue.objects.create(name="fenced", agent_acquire_needs_reconciliation=False)
    a, _ = agent()
    lease = leased_item(a, key="fence-1", queue="fenced")
    effect_under(lease, a, "open-1", kind="payment.charge", target="acct")
    client.force_login(make_user("opal", "operator"))
    assert "fenced for" not in client.get("/work/fence-1").content.decode()
    reason = {"reason_category": "stuck", "reason_text": "stuck in a loop"}
    r = client.post(f"/leases/{lease.id}/revoke", reason)
    assert r.status_code == 302
    assert Lease.objects.get(id=lease.id).fenced_until_ms > 0
    html = client.get("/work/fence-1").content.decode()
    shown = re.search(r"fenced for <span[^>]*>([0-9.]+) s</span> more: no agent may acquire", html)
    assert shown is not None, html
    assert 0 < float(shown.group(1)) <= lease.ttl_ms / 1000 + 1


def test_a_recipients_repeated_refusals_are_one_alert_with_a_count(client, agent, recipient):
    a, _ = agent()
    leased_item(a, key="counted-1")
    ledger, _ = recipient("ledger")
    for _ in range(3):
        recipient_report_record(
            actor=Actor.recipient(ledger), work_key="counted-1", reason="expired", epoch=1
        )
    client.force_login(make_user("oren", "operator"))
    html = client.get("/alerts/?view=list").content.decode()  # one by one
    assert html.count("recipient refusal</span>") == 1
    assert "×3" in html
    assert "(3 occurrences)" in client.get("/alerts/").content.decode()  # its group
