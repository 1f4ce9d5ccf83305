"""Sweep services on real PostgreSQL: transitions, alerts, injected races, outage recovery,
retention. Time moves by aging stored times."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from leaseboard.core.models import Alert, Executor, Lease, LeaseEvent
from leaseboard.core.services import leases as ls
from leaseboard.core.services.alerts import lease_alert
from leaseboard.sweeps import services
from tests.builders import age_leases, age_sweep_clock, bulk_leases, leased_item

pytestmark = pytest.mark.postgres


def alerts(kind: str) -> list[Alert]:
    return list(Alert.objects.filter(kind=kind))


@pytest.mark.django_db
def test_an_agent_that_stops_renewing_goes_to_jeopardy_then_expired_with_one_alert_each(agent):
    executor, _ = agent()
    lease = leased_item(executor, "stop-1")
    services.sweep_run()
    assert Lease.objects.get(id=lease.id).state == "active"

    age_leases(lease.jeopardy_after_ms + 100, lease_ids=[lease.id])
    first = services.sweep_run()
    again = services.sweep_run()
    lease.refresh_from_db()
    assert (first.jeopardy, again.jeopardy) == (1, 0)
    assert lease.state == "jeopardy" and lease.due_at_ms == lease.expires_at_ms
    (jeopardy,) = alerts("jeopardy")
    assert jeopardy.dedupe_key == f"jeopardy:{lease.id}:{lease.epoch}"
    assert jeopardy.due_at_ms == lease.jeopardy_at_ms

    age_leases(lease.ttl_ms, lease_ids=[lease.id])
    assert services.sweep_run().expired == 1
    assert services.sweep_run().expired == 0
    lease.refresh_from_db()
    assert lease.state == "expired" and lease.end_reason == "ttl elapsed"
    (expired,) = alerts("expired")
    assert expired.epoch == lease.epoch and expired.due_at_ms == lease.expires_at_ms
    jeopardy.refresh_from_db()
    assert jeopardy.resolved_at_ms is not None  # superseded by the expiry alert
    kinds = list(LeaseEvent.objects.filter(lease=lease).values_list("kind", flat=True))
    assert sorted(kinds) == ["expired", "granted", "jeopardy"]


@pytest.mark.django_db
def test_a_renew_after_jeopardy_brings_the_lease_back_and_resolves_the_alert(agent):
    executor, _ = agent()
    lease = leased_item(executor, "back-1")
    age_leases(lease.jeopardy_after_ms + 100, lease_ids=[lease.id])
    services.sweep_run()
    assert Lease.objects.get(id=lease.id).state == "jeopardy"
    ls.lease_renew(lease_id=lease.id, executor=executor, epoch=lease.epoch)
    lease.refresh_from_db()
    assert lease.state == "active"
    assert Alert.objects.get(kind="jeopardy").resolved_at_ms is not None
    assert services.sweep_run().jeopardy == 0


@pytest.mark.django_db
def test_a_lease_that_passed_expiry_unswept_expires_directly_with_one_alert(agent):
    executor, _ = agent()
    lease = leased_item(executor, "late-1")
    age_leases(lease.ttl_ms + 5000, lease_ids=[lease.id])
    report = services.sweep_run()
    assert (report.jeopardy, report.expired) == (0, 1)
    assert [a.kind for a in Alert.objects.all()] == ["expired"]


@pytest.mark.django_db
def test_human_standing_that_lapses_raises_standing_lapsed(agent):
    user = get_user_model().objects.create_user("olga")
    human = Executor.objects.create(name="human:olga", kind="human", user=user)
    lease = leased_item(human, "human-1")
    age_leases(lease.ttl_ms + 1, lease_ids=[lease.id])
    services.sweep_run()
    assert Lease.objects.get(id=lease.id).state == "expired"
    assert [a.kind for a in Alert.objects.all()] == ["standing_lapsed"]


@pytest.mark.django_db
def test_a_lease_renewed_between_the_sweeps_read_and_write_is_left_alone(agent):
    executor, _ = agent()
    renewed = leased_item(executor, "race-renew")
    released = leased_item(executor, "race-release")
    revoked = leased_item(executor, "race-revoke")
    untouched = leased_item(executor, "race-none")
    ids = [renewed.id, released.id, revoked.id, untouched.id]
    age_leases(renewed.jeopardy_after_ms + 100, lease_ids=ids)
    calls = []

    def race(claimed: list[Lease]) -> None:
        # Runs inside the batch transaction, after the claim, before the write.
        calls.append(sorted(str(lease.id) for lease in claimed))
        ls.lease_renew(lease_id=renewed.id, executor=executor, epoch=renewed.epoch)
        for target, state in ((released, "released"), (revoked, "revoked")):
            fresh = Lease.objects.get(id=target.id)
            ls.lease_end_locked(lease=fresh, state=state, now_ms=fresh.renewed_at_ms, reason="x")

    report = services.sweep_run(before_write=race)
    assert len(calls) == 1 and len(calls[0]) == 4
    assert (report.jeopardy, report.skipped) == (1, 3)
    states = dict(Lease.objects.filter(id__in=ids).values_list("id", "state"))
    assert states == {
        renewed.id: "active",
        released.id: "released",
        revoked.id: "revoked",
        untouched.id: "jeopardy",
    }
    assert list(Alert.objects.values_list("lease_id", flat=True)) == [untouched.id]
    assert not LeaseEvent.objects.filter(lease_id=renewed.id, kind="jeopardy").exists()


@pytest.mark.django_db
def test_an_outage_of_two_ttls_gives_a_recovery_grace_and_one_summary_alert(agent, db_clock):
    executor, _ = agent()
    bulk_leases(200, prefix="outage-", holder=executor, jeopardy_in_ms=10_000, expires_in_ms=15_000)
    healthy = leased_item(executor, "outage-healthy")
    services.sweep_run()  # the last sweep before the outage
    ttl = 15_000
    # Two ttls pass with no renewals and no sweeps; the healthy one renews just before.
    silent = list(Lease.objects.exclude(id=healthy.id).values_list("id", flat=True))
    age_leases(2 * ttl + 1000, lease_ids=silent)
    age_sweep_clock(2 * ttl + 1000)
    ls.lease_renew(lease_id=healthy.id, executor=executor, epoch=healthy.epoch)

    report = services.sweep_run()
    assert report.expired == 0
    assert report.recovered == 200
    assert report.recovery_alert_id is not None
    (summary,) = Alert.objects.all()
    assert summary.kind == "recovery" and summary.detail["leases"] == 200
    assert Lease.objects.filter(state="jeopardy").count() == 200
    assert Lease.objects.filter(state="expired").count() == 0
    assert Lease.objects.get(id=healthy.id).state == "active"
    assert services.sweep_run().recovered == 0  # a second sweep finds nothing more

    # The grace is real: a holder that renews now keeps its lease...
    one = Lease.objects.filter(state="jeopardy").first()
    ls.lease_renew(lease_id=one.id, executor=executor, epoch=one.epoch)
    assert Lease.objects.get(id=one.id).state == "active"
    # ...and those that still do not renew expire normally, one alert each.
    # (Time moves forward through the clock seam: aging rows would move them back into
    # the outage window.) The renewed lease renews again; the others stay silent.
    db_clock.advance(ttl // 2)
    services.sweep_run()
    ls.lease_renew(lease_id=one.id, executor=executor, epoch=one.epoch)
    ls.lease_renew(lease_id=healthy.id, executor=executor, epoch=healthy.epoch)
    db_clock.advance(ttl // 2 + 1)
    report = services.sweep_run()
    assert (report.expired, report.recovered) == (199, 0)
    assert Alert.objects.filter(kind="expired").count() == 199
    assert Alert.objects.filter(kind="recovery").count() == 1


@pytest.mark.django_db
def test_a_short_gap_between_sweeps_is_not_an_outage(agent):
    executor, _ = agent()
    bulk_leases(20, prefix="gap-", holder=executor, jeopardy_in_ms=-10, expires_in_ms=-5)
    services.sweep_run()  # first sweep ever: nothing to compare with
    age_sweep_clock(1000)
    bulk_leases(5, prefix="gap2-", holder=executor, jeopardy_in_ms=-10, expires_in_ms=-5)
    report = services.sweep_run()
    assert report.recovered == 0 and report.expired == 5
    assert not Alert.objects.filter(kind="recovery").exists()


@pytest.mark.django_db
def test_a_long_sweep_is_not_an_outage_for_the_sweep_that_starts_after_it(agent):
    """An expiry storm: one sweep runs batch after batch for longer than an outage. Each
    committed batch moves the sweep clock on, so the next sweep to start finds no gap,
    and nothing due meanwhile gets a recovery grace."""
    executor, _ = agent()
    services.sweep_run()  # the clock's first stamp
    bulk_leases(3, prefix="storm-", holder=executor, jeopardy_in_ms=-10, expires_in_ms=-5)
    # Each batch of one lease "takes" 10 s: the clock's stamp ages by that inside it.
    report = services.sweep_run(batch_size=1, before_write=lambda rows: age_sweep_clock(10_000))
    assert report.expired == 3 and report.batches == 4
    bulk_leases(2, prefix="late-", holder=executor, jeopardy_in_ms=-10, expires_in_ms=-5)
    after = services.sweep_run()
    assert after.recovered == 0 and after.expired == 2
    assert not Alert.objects.filter(kind="recovery").exists()


@pytest.mark.django_db
def test_the_takeover_step_runs_after_the_lease_batches_with_the_sweeps_batch_size(
    monkeypatch, agent
):
    executor, _ = agent()
    lease = leased_item(executor, "step-1")
    seen = []

    def expire_takeover_requests(*, batch_size: int) -> int:
        # The lease batches have committed by the time the step runs.
        seen.append((batch_size, Lease.objects.get(id=lease.id).state))
        return 3

    monkeypatch.setattr(services, "takeover_sweep_step", expire_takeover_requests)
    age_leases(lease.ttl_ms + 100, lease_ids=[lease.id])
    report = services.sweep_run(batch_size=7)
    assert seen == [(7, "expired")]
    assert report.steps == {"takeovers": 3, "approvals": 0, "approval_reminders": 0}


@pytest.mark.django_db
def test_a_failing_takeover_step_does_not_stop_lease_expiry(monkeypatch, agent):
    executor, _ = agent()
    lease = leased_item(executor, "step-2")

    def broken(*, batch_size: int) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(services, "takeover_sweep_step", broken)
    age_leases(lease.ttl_ms + 100, lease_ids=[lease.id])
    report = services.sweep_run()
    assert report.expired == 1 and report.steps == {"approvals": 0, "approval_reminders": 0}
    assert Lease.objects.get(id=lease.id).state == "expired"


@pytest.mark.django_db
def test_retention_prunes_lease_events_past_the_configured_age(agent):
    executor, _ = agent()
    lease = leased_item(executor, "ret-1")
    LeaseEvent.objects.filter(lease=lease).update(at_ms=1_000)  # 1970: far past any age
    LeaseEvent.objects.create(
        lease=lease, work_item_id=lease.work_item_id, epoch=1, kind="extended", at_ms=10**13
    )
    assert services.lease_events_prune(older_than_days=30, batch_size=1) == 1
    assert list(LeaseEvent.objects.values_list("kind", flat=True)) == ["extended"]
    lease.refresh_from_db()
    assert lease.renew_count == 0  # aggregates live on the lease row, untouched


@pytest.mark.django_db
def test_alerts_open_skips_an_existing_dedupe_key_and_returns_only_new_ids(agent):
    executor, _ = agent()
    lease = Lease.objects.select_related("holder").get(id=leased_item(executor, "dup-1").id)
    make = lambda: lease_alert(lease, "expired", "m", due_at_ms=1, now_ms=2)  # noqa: E731
    first = services.alerts_open([make()])
    assert len(first) == 1
    assert services.alerts_open([make(), make()]) == []
    assert Alert.objects.count() == 1


def sweeping(db_clock, ms: int) -> services.SweepReport:
    """Move the clock `ms` forward with a sweep every 2 s; the sweeps' reports summed."""
    total = services.SweepReport()
    for step in [2000] * (ms // 2000) + [ms % 2000]:
        db_clock.advance(step)
        report = services.sweep_run()
        total.expired += report.expired
        total.recovered += report.recovered
    return total


@pytest.mark.django_db
@pytest.mark.parametrize("cause", ["database_unavailable", ""])
def test_leases_that_expire_after_a_database_outage_say_so_instead_of_blaming_the_holder(
    agent, db_clock, cause
):
    executor, _ = agent()
    bulk_leases(3, prefix="down-", holder=executor, jeopardy_in_ms=10_000, expires_in_ms=15_000)
    services.sweep_run()
    ttl = 15_000
    silent = list(Lease.objects.values_list("id", flat=True))
    age_leases(2 * ttl + 1000, lease_ids=silent)
    age_sweep_clock(2 * ttl + 1000)

    # The sweep after the outage: its caller saw its own sweeps fail on the database (or not).
    report = services.sweep_run(outage_cause=cause)
    assert report.recovered == 3 and report.expired == 0
    (summary,) = Alert.objects.filter(kind="recovery")
    assert summary.detail["cause"] == (cause or "sweeps_stopped")
    assert summary.message.startswith(
        "The database was unavailable for" if cause else "No sweep ran for"
    )
    # Time moves with a sweep every 2 s (a longer gap would be another outage). One holder
    # renews in the grace, then stops too: its expiry is its own.
    sweeping(db_clock, ttl // 2)
    back = Lease.objects.first()
    ls.lease_renew(lease_id=back.id, executor=executor, epoch=back.epoch)
    report = sweeping(db_clock, ttl // 2 + 1)
    assert report.expired == 2
    expired = {a.lease_id: a for a in Alert.objects.filter(kind="expired")}
    assert len(expired) == 2 and back.id not in expired
    for alert in expired.values():
        if cause:
            assert alert.detail["cause"] == "database_unavailable"
            assert alert.message.startswith("the database was unavailable for 31.")
            assert 31_000 <= alert.detail["outage_to_ms"] - alert.detail["outage_from_ms"] < 32_000
        else:
            assert "cause" not in alert.detail
            assert alert.message.endswith("stopped renewing; the lease expired")
    sweeping(db_clock, ttl + 1)
    late = Alert.objects.get(kind="expired", lease_id=back.id)
    assert "cause" not in late.detail  # it renewed after the outage: stopping was its own
    assert Alert.objects.filter(kind="recovery").count() == 1  # raised once
    assert Alert.objects.filter(kind="expired").count() == 3  # one per lease
