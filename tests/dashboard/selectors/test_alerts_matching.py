"""Acknowledge by query's selection: the alerts page's filters, open and unacknowledged
only, counted up to the bound."""

from __future__ import annotations

import pytest
from django.http import QueryDict

from leaseboard.core.models import Alert
from leaseboard.dashboard.selectors.alerts_matching import alerts_matching
from tests.builders import leased_item

pytestmark = pytest.mark.django_db


def test_it_selects_the_filtered_alerts_that_still_need_an_acknowledgement(agent):
    flaky, _ = agent("flaky")
    steady, _ = agent("steady")
    made = {}
    for name, bot, kind, acked, resolved in (
        ("a", flaky, "jeopardy", None, None),
        ("b", flaky, "jeopardy", 5, None),
        ("c", flaky, "jeopardy", None, 5),
        ("d", flaky, "expired", None, None),
        ("e", steady, "jeopardy", None, None),
    ):
        lease = leased_item(bot, key=f"al-{name}")
        made[name] = Alert.objects.create(
            kind=kind,
            dedupe_key=name,
            message=name,
            opened_at_ms=1,
            work_item=lease.work_item,
            lease=lease,
            acknowledged_at_ms=acked,
            resolved_at_ms=resolved,
        )
    matching = alerts_matching(QueryDict("agent=flaky&kind=jeopardy&state=all"))
    assert [a.id for a in matching.alerts] == [made["a"].id]
    assert matching.total == 1 and not matching.capped
    assert matching.query == {"agent": "flaky", "kind": "jeopardy", "state": "all"}
    everything = alerts_matching(QueryDict(""))
    assert {a.id for a in everything.alerts} == {made[k].id for k in "ade"}
