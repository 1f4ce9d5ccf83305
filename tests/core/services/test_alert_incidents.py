"""Alerts as incidents (issue 28, point 6): recurrences of one (agent, kind) within
LEASEBOARD_ALERT_FOLD_WINDOW_MS fold into the open alert, which counts them and says when
it was first and last seen; the folded rows keep their facts, resolved, pointing at it."""

from __future__ import annotations

import pytest

from leaseboard.core.models import Alert
from leaseboard.dashboard.selectors.alerts import AlertFilters, alert_groups
from leaseboard.sweeps.services import sweep_run
from leaseboard.web.pages import alert_badge_count
from tests.builders import age_lease, leased_item

pytestmark = [pytest.mark.django_db, pytest.mark.alert_folding]


def _jeopardize(leases) -> None:  # type: ignore[no-untyped-def]
    for lease in leases:
        age_lease(lease.id, lease.jeopardy_after_ms + 100)


def test_one_agents_jeopardy_in_one_sweep_is_one_incident_counting_every_lease(agent):
    bot, _ = agent("flaky-bot")
    leases = [leased_item(bot, ttl_ms=60_000) for _ in range(5)]
    _jeopardize(leases)
    report = sweep_run()
    assert report.jeopardy == 5
    incidents = list(Alert.objects.filter(kind="jeopardy", folded_into__isnull=True))
    assert len(incidents) == 1
    incident = incidents[0]
    assert incident.occurrences == 5 and incident.resolved_at_ms is None
    folded = Alert.objects.filter(folded_into=incident)
    assert folded.count() == 4
    assert all(a.resolved_at_ms is not None for a in folded)
    assert {a.lease_id for a in folded} | {incident.lease_id} == {x.id for x in leases}
    assert alert_badge_count() == 1
    group = alert_groups(AlertFilters()).groups[0]
    assert (group.count, group.occurrences, group.agent) == (1, 5, "flaky-bot")


def test_a_later_recurrence_folds_in_within_the_window_and_opens_anew_after_it(agent, settings):
    bot, _ = agent("flaky-bot")
    first = leased_item(bot, ttl_ms=600_000)
    _jeopardize([first])
    sweep_run()
    incident = Alert.objects.get(kind="jeopardy")
    assert incident.last_seen_at_ms is None
    second = leased_item(bot, ttl_ms=600_000)
    _jeopardize([second])
    sweep_run()
    incident.refresh_from_db()
    assert incident.occurrences == 2 and incident.last_seen_at_ms >= incident.opened_at_ms
    assert Alert.objects.get(lease=second).folded_into_id == incident.id
    group = alert_groups(AlertFilters()).groups[0]
    assert group.first_ms == incident.opened_at_ms and group.last_ms == incident.last_seen_at_ms

    # Last seen longer ago than the window: the next one is an incident of its own.
    Alert.objects.filter(id=incident.id).update(
        opened_at_ms=incident.opened_at_ms - 700_000,
        last_seen_at_ms=incident.opened_at_ms - 700_000,
    )
    third = leased_item(bot, ttl_ms=600_000)
    _jeopardize([third])
    sweep_run()
    assert Alert.objects.get(lease=third).folded_into_id is None
    assert Alert.objects.filter(kind="jeopardy", folded_into__isnull=True).count() == 2


def test_agents_and_kinds_are_incidents_of_their_own_and_a_zero_window_folds_nothing(
    agent, settings
):
    a, _ = agent("a-bot")
    b, _ = agent("b-bot")
    la = [leased_item(a, ttl_ms=60_000) for _ in range(2)]
    lb = [leased_item(b, ttl_ms=60_000) for _ in range(2)]
    _jeopardize(la + lb)
    sweep_run()
    assert sorted(
        Alert.objects.filter(folded_into__isnull=True).values_list("occurrences", flat=True)
    ) == [2, 2]
    for lease in la:  # now they expire: expiry is another kind, another incident
        age_lease(lease.id, 60_000)
    sweep_run()
    assert Alert.objects.get(kind="expired", folded_into__isnull=True).occurrences == 2

    settings.LEASEBOARD_ALERT_FOLD_WINDOW_MS = 0
    c, _ = agent("c-bot")
    lc = [leased_item(c, ttl_ms=60_000) for _ in range(3)]
    _jeopardize(lc)
    sweep_run()
    assert Alert.objects.filter(lease__holder=c, folded_into__isnull=True).count() == 3
