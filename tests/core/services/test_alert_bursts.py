"""Bursts (issue 32, the expiry storm): many agents' alerts of one kind in one queue at
once are one incident of the queue, with a count, first and last seen and a drill-down
list, on the alerts page, the badge and the deliveries; every lease keeps its own alert
row (nothing is lost). Against the real database, through the real sweep."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaseboard.core.models import Alert, Executor, Queue
from leaseboard.core.services import alert_bursts
from leaseboard.core.services.alert_bursts import alert_groups_settle, alerts_group_bursts
from leaseboard.dashboard.selectors.alerts import AlertFilters, alert_groups, alerts_list
from leaseboard.sweeps.models import NotificationDelivery
from leaseboard.sweeps.services import sweep_run
from leaseboard.web.pages import alert_badge_count
from tests.builders import age_lease, leased_item, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.alert_folding]


@pytest.fixture
def bursts(settings):  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_ALERT_BURST_MIN = 5
    settings.LEASEBOARD_ALERT_BURST_WINDOW_MS = 60_000
    return settings


def _fleet(agent, n: int, queue: str = "default", prefix: str = "bot"):  # type: ignore[no-untyped-def]
    Queue.objects.get_or_create(name=queue)
    return [
        leased_item(agent(f"{prefix}-{queue}-{i}")[0], queue=queue, ttl_ms=60_000) for i in range(n)
    ]


def _expire(leases) -> None:  # type: ignore[no-untyped-def]
    for lease in leases:
        age_lease(lease.id, 61_000)


def test_many_agents_expiring_at_once_are_one_incident_of_their_queue(agent, bursts):
    queue, _ = Queue.objects.get_or_create(name="payments")
    queue.notify = {"webhooks": [{"url": "https://hooks.example/alerts", "secret": "s" * 16}]}
    queue.save()
    leases = _fleet(agent, 8, queue="payments")
    _expire(leases)

    report = sweep_run()

    assert report.expired == 8
    incident = Alert.objects.get(queue__isnull=False)
    assert (incident.kind, incident.queue.name, incident.occurrences) == ("expired", "payments", 8)
    assert incident.lease_id is None and incident.resolved_at_ms is None
    assert incident.message.startswith("8 leases expired in queue payments within ")
    assert incident.opened_at_ms <= incident.last_seen_at_ms
    members = Alert.objects.filter(folded_into=incident)
    assert {a.lease_id for a in members} == {lease.id for lease in leases}  # nothing lost
    assert all(a.resolved_at_ms is not None and a.kind == "expired" for a in members)
    assert alert_badge_count() == 1
    groups = alert_groups(AlertFilters()).groups
    assert [(g.queue, g.kind, g.count, g.occurrences) for g in groups] == [
        ("payments", "expired", 1, 8)
    ]
    drill = alerts_list(AlertFilters.from_query({"incident": str(incident.id)}))
    assert {a.lease_id for a in drill.alerts} == {lease.id for lease in leases}
    # The webhook hears of the burst once, not once per lease.
    assert list(NotificationDelivery.objects.values_list("alert_id", flat=True)) == [incident.id]


def test_fewer_than_the_minimum_stay_incidents_of_their_own(agent, bursts):
    leases = _fleet(agent, 3)
    _expire(leases)
    sweep_run()
    assert not Alert.objects.filter(queue__isnull=False).exists()
    assert Alert.objects.filter(kind="expired", folded_into__isnull=True).count() == 3
    assert alert_badge_count() == 3


def test_the_start_of_a_burst_joins_it_and_later_ones_join_within_the_window(agent, bursts):
    first = _fleet(agent, 3, prefix="early")
    _expire(first)
    sweep_run()  # 3: below the minimum, one incident each
    assert Alert.objects.filter(kind="expired", folded_into__isnull=True).count() == 3
    second = _fleet(agent, 3, prefix="late")
    _expire(second)
    sweep_run()  # 3 more within the window: 6, a burst that takes in the first 3

    incident = Alert.objects.get(queue__isnull=False)
    assert incident.occurrences == 6
    assert Alert.objects.filter(folded_into=incident).count() == 6
    assert Alert.objects.filter(kind="expired", folded_into__isnull=True).count() == 1

    third = _fleet(agent, 1, prefix="later")
    _expire(third)
    sweep_run()  # one more, the burst still open and recent: it joins
    incident.refresh_from_db()
    assert incident.occurrences == 7 and incident.message.startswith("7 leases expired")

    # Past the window, the next ones start anew (a new burst needs the minimum again).
    Alert.objects.filter(id=incident.id).update(last_seen_at_ms=incident.last_seen_at_ms - 61_000)
    Alert.objects.filter(folded_into=incident).update(opened_at_ms=incident.opened_at_ms - 61_000)
    fourth = _fleet(agent, 2, prefix="next")
    _expire(fourth)
    sweep_run()
    assert Alert.objects.filter(queue__isnull=False).count() == 1
    assert Alert.objects.filter(kind="expired", folded_into__isnull=True, queue=None).count() == 2


def test_queues_and_kinds_burst_apart(agent, bursts):
    Queue.objects.get_or_create(name="refunds")
    a = _fleet(agent, 5, queue="default")
    b = _fleet(agent, 5, queue="refunds")
    _expire(a + b)
    sweep_run()
    bursts_seen = sorted(
        Alert.objects.filter(queue__isnull=False).values_list("queue__name", "kind", "occurrences")
    )
    assert bursts_seen == [("default", "expired", 5), ("refunds", "expired", 5)]


def test_a_jeopardy_burst_settles_once_its_leases_have_expired(agent, bursts):
    leases = _fleet(agent, 6)
    for lease in leases:
        age_lease(lease.id, lease.jeopardy_after_ms + 100)
    sweep_run()
    jeopardy = Alert.objects.get(queue__isnull=False, kind="jeopardy")
    assert jeopardy.occurrences == 6 and jeopardy.resolved_at_ms is None
    assert alert_groups_settle() == 0  # all six still in jeopardy

    for lease in leases:
        age_lease(lease.id, 61_000)
    report = sweep_run()
    jeopardy.refresh_from_db()
    assert jeopardy.resolved_at_ms is not None
    assert report.steps["alert_groups_settled"] == 1
    assert Alert.objects.get(queue__isnull=False, kind="expired").occurrences == 6
    assert alert_badge_count() == 1


def test_a_zero_window_turns_bursts_off_and_ids_pass_through(agent, bursts):
    bursts.LEASEBOARD_ALERT_BURST_WINDOW_MS = 0
    assert alert_bursts.burst_window_ms() == 0
    leases = _fleet(agent, 6)
    _expire(leases)
    sweep_run()
    assert not Alert.objects.filter(queue__isnull=False).exists()
    ids = list(Alert.objects.values_list("id", flat=True))
    assert alerts_group_bursts(ids) == ids


def test_the_alerts_page_shows_a_burst_as_one_row_with_a_drill_down(client, agent, bursts):
    client.force_login(make_user("olga-bursts", "operator"))
    leases = _fleet(agent, 6, queue="payments")
    _expire(leases)
    sweep_run()
    incident = Alert.objects.get(queue__isnull=False)
    html = client.get("/alerts/").content.decode()
    assert html.count('id="group-') == 1
    assert "many agents" in html and "in queue payments" in html
    assert "6 leases expired in queue payments" in html
    assert f"incident={incident.id}" in html
    drill = client.get(f"/alerts/?incident={incident.id}").content.decode()
    assert f"burst incident #{incident.id}" in drill
    assert all(str(lease.work_item.key) in drill for lease in leases)


def _open_burst(agent, n: int = 5):  # type: ignore[no-untyped-def]
    """A burst of expiries open in the default queue, as a storm's first batch leaves it."""
    _expire(_fleet(agent, n, prefix="first"))
    sweep_run()
    return Alert.objects.get(queue__isnull=False, kind="expired")


def test_while_a_burst_is_open_a_batch_s_alerts_are_born_its_members(agent, bursts):
    incident = _open_burst(agent)
    more = _fleet(agent, 6, prefix="more")
    _expire(more)
    with CaptureQueriesContext(connection) as sweep:
        report = sweep_run()

    assert report.expired == 6
    incident.refresh_from_db()
    assert incident.occurrences == 11 and incident.message.startswith("11 leases expired")
    members = Alert.objects.filter(lease_id__in=[lease.id for lease in more])
    assert {(a.kind, a.folded_into_id) for a in members} == {("expired", incident.id)}
    assert all(a.resolved_at_ms == a.opened_at_ms for a in members)  # resolved as born
    assert incident.last_seen_at_ms == members[0].opened_at_ms
    assert alert_badge_count() == 1
    # Born members: no alert row is written a second time to fold it (the storm's cost).
    refolds = [q["sql"] for q in sweep.captured_queries if 'SET "folded_into_id"' in q["sql"]]
    assert refolds == []
    assert list(NotificationDelivery.objects.values_list("alert_id", flat=True)) == []


def test_an_agent_s_own_open_incident_comes_before_the_open_burst(agent, bursts):
    """The per-agent fold first, as after the write: an agent with an open incident of the
    kind folds into it; an agent with two alerts in the batch folds the second into the
    first, which joins the burst."""
    incident = _open_burst(agent)
    repeat = Executor.objects.get(name="first-default-0")  # its expiry is in the burst
    Alert.objects.filter(folded_into=incident, lease__holder=repeat).update(
        folded_into=None,
        resolved_at_ms=None,  # an incident of its own, still open
    )
    own = Alert.objects.get(lease__holder=repeat)
    twice, _ = agent("twice")
    again = leased_item(repeat, ttl_ms=60_000)
    pair = [leased_item(twice, ttl_ms=60_000) for _ in range(2)]
    alone = _fleet(agent, 2, prefix="alone")
    _expire([again, *pair, *alone])
    sweep_run()

    def folded(lease):  # type: ignore[no-untyped-def]
        return Alert.objects.get(lease_id=lease.id, kind="expired").folded_into_id

    assert folded(again) == own.id
    first, second = sorted(
        Alert.objects.filter(lease__holder=twice, kind="expired"), key=lambda a: a.id
    )
    assert (first.folded_into_id, second.folded_into_id) == (incident.id, first.id)
    assert {folded(lease) for lease in alone} == {incident.id}
    incident.refresh_from_db()
    own.refresh_from_db()
    # The burst still counts the row made its own above (5), then the pair (2) and the two.
    assert (incident.occurrences, own.occurrences) == (5 + 2 + 2, 2)


def test_a_burst_closed_after_the_plan_read_it_gets_no_members(agent, bursts, monkeypatch):
    """A person resolves the burst between the batch's plan and its write: the alerts born
    into it are unfolded and grouped anew (five: a new burst, notified)."""
    from leaseboard.sweeps import batch

    incident = _open_burst(agent)
    queue = Queue.objects.get(name="default")
    queue.notify = {"webhooks": [{"url": "https://hooks.example/alerts", "secret": "s" * 16}]}
    queue.save()
    planned = batch.burst_joins_plan

    def plan_then_resolve(rows, now_ms):  # type: ignore[no-untyped-def]
        plan = planned(rows, now_ms)
        assert plan is not None and set(plan.incident_of.values()) == {incident.id}
        Alert.objects.filter(id=incident.id).update(resolved_at_ms=now_ms)
        return plan

    monkeypatch.setattr(batch, "burst_joins_plan", plan_then_resolve)
    more = _fleet(agent, 5, prefix="more")
    _expire(more)
    sweep_run()

    incident.refresh_from_db()
    assert incident.occurrences == 5  # counted nothing more once closed
    new = Alert.objects.get(queue__isnull=False, resolved_at_ms__isnull=True)
    assert new.id != incident.id and new.occurrences == 5
    members = Alert.objects.filter(lease_id__in=[lease.id for lease in more])
    assert {a.folded_into_id for a in members} == {new.id}
    assert NotificationDelivery.objects.filter(alert_id=new.id).exists()


def test_a_jeopardy_burst_takes_born_members_too(agent, bursts):
    first = _fleet(agent, 5, prefix="first")
    for lease in first:
        age_lease(lease.id, lease.jeopardy_after_ms + 100)
    sweep_run()
    incident = Alert.objects.get(queue__isnull=False, kind="jeopardy")
    more = _fleet(agent, 3, prefix="more")
    for lease in more:
        age_lease(lease.id, lease.jeopardy_after_ms + 100)
    sweep_run()
    incident.refresh_from_db()
    assert incident.occurrences == 8
    members = Alert.objects.filter(lease_id__in=[lease.id for lease in more], kind="jeopardy")
    assert {(a.folded_into_id, a.resolved_at_ms is not None) for a in members} == {
        (incident.id, True)
    }
