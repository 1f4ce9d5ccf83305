"""Raising alerts (leaseboard.core.services.alert_raise): once per dedupe key, whoever
notices first; the alert a lease's expiry raises names its holder, or the outage."""

from __future__ import annotations

import pytest

from leaseboard.core.models import Alert
from leaseboard.core.services.alert_raise import alerts_open, expiry_alert, lease_alert
from tests.builders import leased_item

pytestmark = pytest.mark.django_db


def test_an_alert_opens_once_per_dedupe_key(agent):
    lease = leased_item(agent("raiser")[0])
    alert = lease_alert(lease, "jeopardy", "x" * 600, due_at_ms=1, now_ms=2)
    assert alert.dedupe_key == f"jeopardy:{lease.id}:{lease.epoch}" and len(alert.message) == 500
    first = alerts_open([alert])
    again = alerts_open([lease_alert(lease, "jeopardy", "again", due_at_ms=1, now_ms=3)])
    assert len(first) == 1 and again == []
    assert Alert.objects.get().message == "x" * 500
    assert alerts_open([]) == []


def test_an_expiry_alert_blames_the_holder_or_the_database_outage(agent):
    lease = leased_item(agent("quiet-bot")[0])
    plain = expiry_alert(lease, now_ms=10)
    assert plain.kind == "expired" and "quiet-bot stopped renewing" in plain.message
    outage = {"cause": "database_unavailable", "outage_from_ms": 0, "outage_to_ms": 4000}
    blamed = expiry_alert(lease, now_ms=10, outage=outage)
    assert blamed.message.startswith("the database was unavailable for 4.0 s")
    assert blamed.detail["cause"] == "database_unavailable"
    assert blamed.detail["holder"] == "quiet-bot"
