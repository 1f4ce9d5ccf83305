"""Folding (leaseboard.core.services.alert_folding): one agent's alerts of one kind opened
together are one incident; kinds outside FOLDING_KINDS never fold."""

from __future__ import annotations

import pytest

from leaseboard.core.models import Alert
from leaseboard.core.services.alert_folding import (
    FOLDING_KINDS,
    alerts_fold,
    alerts_fold_per_agent,
)
from leaseboard.core.services.alert_raise import lease_alert
from tests.builders import leased_item

pytestmark = [pytest.mark.django_db, pytest.mark.alert_folding]


def _opened(leases, kind: str) -> list[int]:  # type: ignore[no-untyped-def]
    rows = Alert.objects.bulk_create(
        [lease_alert(lease, kind, "m", due_at_ms=1, now_ms=1000) for lease in leases]
    )
    return [a.id for a in rows]


def test_one_agents_alerts_opened_together_fold_into_the_first(agent):
    bot = agent("folder")[0]
    ids = _opened([leased_item(bot) for _ in range(3)], "jeopardy")
    assert alerts_fold_per_agent(ids) == ids[:1]
    first = Alert.objects.get(id=ids[0])
    assert first.occurrences == 3 and first.resolved_at_ms is None
    assert set(Alert.objects.filter(folded_into=first).values_list("id", flat=True)) == set(ids[1:])


def test_kinds_outside_folding_pass_through(agent, settings):
    settings.LEASEBOARD_ALERT_BURST_MIN = 100
    assert "recovery" not in FOLDING_KINDS
    bot = agent("recoverer")[0]
    ids = _opened([leased_item(bot) for _ in range(2)], "recovery")
    assert alerts_fold(ids) == ids
    assert not Alert.objects.filter(folded_into__isnull=False).exists()


def test_incidents_are_updated_in_id_order_whatever_order_their_alerts_came_in(agent):
    # Two sweeps folding into the same two incidents must lock them in one order, or each
    # waits for the other (a deadlock, met in a 100,000-agent soak). The fresh alerts name
    # the newer incident first here; the incidents are still updated oldest first.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    one, two = agent("fold-a")[0], agent("fold-b")[0]
    first = _opened([leased_item(one)], "jeopardy")[0]
    second = _opened([leased_item(two)], "jeopardy")[0]
    assert alerts_fold_per_agent([first]) == [first]
    assert alerts_fold_per_agent([second]) == [second]
    fresh = _opened([leased_item(two), leased_item(one)], "jeopardy")  # two's, then one's
    with CaptureQueriesContext(connection) as captured:
        assert alerts_fold_per_agent(fresh) == []
    touched = [
        target
        for q in captured.captured_queries
        if '"occurrences"' in q["sql"] and q["sql"].startswith("UPDATE")
        for target in (first, second)
        if f'"id" = {target}' in q["sql"]
    ]
    assert touched == [first, second]
    assert Alert.objects.get(id=first).occurrences == 2
    assert Alert.objects.get(id=second).occurrences == 2
