"""Acknowledge by query (issue 28, point 7): each alert by the one acknowledgement, an
outcome per alert, the bulk audited with them all, gated and bounded."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import Alert, AuditEntry
from leaseboard.core.services.alerts import alert_acknowledge
from leaseboard.core.services.alerts_bulk import alerts_acknowledge_bulk
from leaseboard.domain.errors import Forbidden, ValidationFailed
from tests.builders import make_user, open_alerts

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


def _alerts(agent, n: int) -> list[Alert]:  # type: ignore[no-untyped-def]
    bot, _ = agent("flaky")
    return open_alerts(bot, n)


def test_it_acknowledges_each_alert_and_says_which_were_done_already(agent):
    olga = make_user("olga", "operator")
    alerts = _alerts(agent, 3)
    alert_acknowledge(alert_id=alerts[1].id, actor=Actor.human(olga), note="on it")
    sam = Actor.human(make_user("sam", "operator"))
    bulk = alerts_acknowledge_bulk(
        alert_ids=[a.id for a in alerts] + [999_999],
        actor=sam,
        note="restarting the flaky pool",
        query={"agent": "flaky"},
    )
    assert [o.ok for o in bulk.outcomes] == [True, False, True, False]
    assert "already acknowledged by olga" in bulk.outcomes[1].detail
    assert bulk.outcomes[1].work_key == "fl-1" and bulk.outcomes[1].about == "jeopardy"
    assert bulk.outcomes[3].code == "not_found"
    assert Alert.objects.get(id=alerts[0].id).acknowledge_note == "restarting the flaky pool"
    assert Alert.objects.get(id=alerts[1].id).acknowledge_note == "on it"  # not twice
    assert AuditEntry.objects.filter(action="alert.acknowledge").count() == 3
    entry = AuditEntry.objects.get(action="alert.acknowledge_bulk")
    assert entry.actor_name == "sam" and entry.after["succeeded"] == 2
    assert entry.before == {
        "query": {"agent": "flaky"},
        "asked": [str(a.id) for a in alerts] + ["999999"],
    }


def test_a_manager_may_not_acknowledge_in_bulk_and_a_note_is_needed(agent):
    alerts = _alerts(agent, 1)
    with pytest.raises(Forbidden):
        alerts_acknowledge_bulk(
            alert_ids=[alerts[0].id], actor=Actor.human(make_user("mia", "manager")), note="x"
        )
    with pytest.raises(ValidationFailed, match="say what you are doing"):
        alerts_acknowledge_bulk(
            alert_ids=[alerts[0].id], actor=Actor.human(make_user("olga", "operator")), note=""
        )
    assert Alert.objects.get(id=alerts[0].id).acknowledged_at_ms is None
