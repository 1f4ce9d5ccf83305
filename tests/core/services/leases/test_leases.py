"""Lease services on real PostgreSQL: races, epochs, expiry, jeopardy, holders, completion."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Alert, Effect, Lease, LeaseEvent, WorkItem
from leaseboard.core.services import effects as fx
from leaseboard.core.services import leases as ls
from leaseboard.core.services.leases import grants
from leaseboard.core.services.work import work_complete
from leaseboard.domain.errors import (
    InJeopardy,
    LeaseExpired,
    NeedsReconciliation,
    NotHolder,
    StaleEpoch,
    WorkLeased,
)
from tests.builders import admit, jeopardy_stored, leased_item
from tests.locking import race_on_a_lock, wait_until_someone_waits_for_a_lock

pytestmark = pytest.mark.postgres


def _propose(lease, executor, key: str, *, kind: str = "k", target: str = "t"):  # type: ignore[no-untyped-def]
    """`executor` proposes an effect under `lease` at epoch 1 with idempotency key `key`."""
    return fx.effect_propose(
        lease_id=lease.id,
        executor=executor,
        epoch=1,
        kind=kind,
        target=target,
        idempotency_key=key,
    )


@pytest.mark.django_db(transaction=True)
def test_sixteen_racing_acquirers_have_exactly_one_winner(agent):
    admit("race-1")
    executors = [agent()[0] for _ in range(16)]
    barrier = threading.Barrier(16)
    outcomes: list[str] = []
    lock = threading.Lock()

    def attempt(executor):  # type: ignore[no-untyped-def]
        try:
            barrier.wait()
            ls.lease_acquire(work_key="race-1", executor=executor)
            result = "won"
        except WorkLeased:
            result = "work_leased"
        except Exception as exc:  # surfaced in the assertion below
            result = repr(exc)
        finally:
            connections.close_all()
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=attempt, args=(e,)) for e in executors]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["won"] + ["work_leased"] * 15
    assert Lease.objects.filter(work_item__key="race-1").count() == 1
    assert WorkItem.objects.get(key="race-1").epoch == 1


@pytest.mark.django_db(transaction=True)
def test_epochs_strictly_increase_across_a_thousand_grants(agent):
    admit("seq-1")
    a, _ = agent()
    epochs = []
    for _ in range(1000):
        grant = ls.lease_acquire(work_key="seq-1", executor=a)
        epochs.append(grant.lease.epoch)
        ls.lease_release(lease_id=grant.lease.id, executor=a, epoch=grant.lease.epoch)
    assert epochs == list(range(1, 1001))
    assert WorkItem.objects.get(key="seq-1").epoch == 1000


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_grant_uses_up_no_epoch(agent, monkeypatch):
    admit("rollback-1")
    a, _ = agent()
    ls.lease_release(
        lease_id=(g := ls.lease_acquire(work_key="rollback-1", executor=a)).lease.id,
        executor=a,
        epoch=g.lease.epoch,
    )

    def fail(**kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("signing failed after the epoch was raised")

    monkeypatch.setattr(grants, "fencing_token_issue", fail)
    with pytest.raises(RuntimeError):
        ls.lease_acquire(work_key="rollback-1", executor=a)
    monkeypatch.undo()
    assert WorkItem.objects.get(key="rollback-1").epoch == 1
    assert Lease.objects.filter(work_item__key="rollback-1").count() == 1
    assert ls.lease_acquire(work_key="rollback-1", executor=a).lease.epoch == 2


@pytest.mark.django_db(transaction=True)
def test_a_thousand_renewals_leave_the_epoch_unchanged(agent):
    a, _ = agent()
    lease = leased_item(a, key="renew-1")
    for _ in range(1000):
        r = ls.lease_renew(lease_id=lease.id, executor=a, epoch=lease.epoch)
        assert r.epoch == lease.epoch and r.certainty == "active"
    lease.refresh_from_db()
    assert lease.epoch == 1 and WorkItem.objects.get(key="renew-1").epoch == 1
    assert lease.renew_count == 1000
    assert len(lease.recent_renewal_times()) == 20  # bounded window, not 1,000 rows
    assert LeaseEvent.objects.filter(lease=lease).count() == 1  # only the grant


@pytest.mark.django_db
def test_renew_sets_an_absolute_expiry_from_the_database_clock(agent, db_clock):
    a, _ = agent()
    lease = leased_item(a, key="abs-1", ttl_ms=9_000)
    db_clock.advance(4_000)
    r1 = ls.lease_renew(lease_id=lease.id, executor=a, epoch=1)
    r2 = ls.lease_renew(lease_id=lease.id, executor=a, epoch=1)
    # Never adds to the remaining time: both answers are one ttl from "now".
    assert 8_000 < r1.expires_in_ms <= 9_000 and 8_000 < r2.expires_in_ms <= 9_000
    lease.refresh_from_db()
    assert lease.max_gap_ms >= 4_000


@pytest.mark.django_db
def test_an_expired_holder_with_a_successor_is_refused_and_only_the_refusal_is_written(
    agent, db_clock
):
    admit("exp-1", ttl_ms=3_000)
    old, _ = agent("old-holder")
    new, _ = agent("successor")
    lease = ls.lease_acquire(work_key="exp-1", executor=old).lease
    db_clock.advance(3_001)  # the database clock moves; nothing sleeps
    successor = ls.lease_acquire(work_key="exp-1", executor=new).lease
    assert successor.epoch == 2
    lease.refresh_from_db()
    assert lease.state == "expired"
    before = {
        "leases": list(Lease.objects.values_list("id", "state", "renewed_at_ms", "expires_at_ms")),
        "events": LeaseEvent.objects.count(),
        "epoch": WorkItem.objects.get(key="exp-1").epoch,
    }
    with pytest.raises(LeaseExpired):
        ls.lease_renew(lease_id=lease.id, executor=old, epoch=1)
    with pytest.raises(StaleEpoch) as info:
        fx.effect_propose(
            lease_id=lease.id,
            executor=old,
            epoch=1,
            kind="payment.charge",
            target="order-9",
            idempotency_key="k-1",
        )
    assert info.value.extra["current_epoch"] == 2 and info.value.extra["your_epoch"] == 1
    after = {
        "leases": list(Lease.objects.values_list("id", "state", "renewed_at_ms", "expires_at_ms")),
        "events": LeaseEvent.objects.count(),
        "epoch": WorkItem.objects.get(key="exp-1").epoch,
    }
    assert sorted(after["leases"]) == sorted(before["leases"])
    assert after["events"] == before["events"] and after["epoch"] == 2
    refused = Effect.objects.get()
    assert (refused.decision, refused.refusal_code, refused.epoch, refused.current_epoch) == (
        "refused",
        "stale_epoch",
        1,
        2,
    )
    assert Alert.objects.filter(kind="stale_effect", lease=lease).count() == 1


@pytest.mark.django_db
def test_a_lease_in_jeopardy_cannot_authorize_but_can_renew_back(agent, db_clock):
    a, _ = agent()
    lease = leased_item(a, key="jeo-1", ttl_ms=9_000)
    db_clock.advance(7_000)  # past jeopardy_after (6 s), before expiry (9 s)
    with pytest.raises(InJeopardy):
        _propose(lease, a, "j-1")
    # The same with the jeopardy materialized by a sweep (stored state).
    jeopardy_stored(lease)
    with pytest.raises(InJeopardy):
        _propose(lease, a, "j-2")
    r = ls.lease_renew(lease_id=lease.id, executor=a, epoch=1)
    assert r.certainty == "active"
    lease.refresh_from_db()
    assert lease.state == "active"
    assert LeaseEvent.objects.filter(lease=lease, kind="recovered").count() == 1
    assert Alert.objects.get(lease=lease, kind="jeopardy").resolved_at_ms is not None
    ok = _propose(lease, a, "j-3")
    assert ok.decision == "authorized" and ok.fencing_token


@pytest.mark.django_db
def test_another_executors_lease_cannot_be_renewed_or_released(agent):
    admit("nh-1")
    owner, _ = agent()
    intruder, _ = agent()
    lease = ls.lease_acquire(work_key="nh-1", executor=owner).lease
    snapshot = Lease.objects.filter(id=lease.id).values().get()
    with pytest.raises(NotHolder):
        ls.lease_renew(lease_id=lease.id, executor=intruder, epoch=1)
    with pytest.raises(NotHolder):
        ls.lease_release(lease_id=lease.id, executor=intruder, epoch=1)
    assert Lease.objects.filter(id=lease.id).values().get() == snapshot


@pytest.mark.django_db
def test_a_retried_release_never_frees_a_newer_grant(agent):
    admit("rel-1")
    a, _ = agent()
    first = ls.lease_acquire(work_key="rel-1", executor=a).lease
    ls.lease_release(lease_id=first.id, executor=a, epoch=1)
    second = ls.lease_acquire(work_key="rel-1", executor=a).lease
    again = ls.lease_release(lease_id=first.id, executor=a, epoch=1)  # the retry
    assert again.state == "released"
    second.refresh_from_db()
    assert second.state == "active" and second.epoch == 2


@pytest.mark.django_db
def test_completion_is_refused_while_an_effect_outcome_is_unknown(agent):
    a, _ = agent()
    lease = leased_item(a, key="done-1")
    e = _propose(lease, a, "d-1", kind="deploy", target="prod")
    fx.effect_report_outcome(effect_id=e.id, executor=a, outcome="unknown")
    with pytest.raises(NeedsReconciliation):
        work_complete(lease_id=lease.id, executor=a, epoch=1)
    assert WorkItem.objects.get(key="done-1").status == "open"
    fx.effect_report_outcome(effect_id=e.id, executor=a, outcome="applied")
    assert work_complete(lease_id=lease.id, executor=a, epoch=1).status == "completed"


@pytest.mark.django_db
def test_an_agent_cannot_reacquire_over_unreconciled_effects(agent, db_clock):
    a, _ = agent()
    b, _ = agent()
    lease = leased_item(a, key="gate-1", ttl_ms=3_000)
    _propose(lease, a, "g-1")
    db_clock.advance(3_001)
    with pytest.raises(NeedsReconciliation):
        ls.lease_acquire(work_key="gate-1", executor=b)
    assert WorkItem.objects.get(key="gate-1").epoch == 1


@pytest.mark.django_db
def test_a_repeated_idempotency_key_returns_the_first_answer(agent):
    a, _ = agent()
    lease = leased_item(a, key="idem-1")
    first = _propose(lease, a, "same")
    again = _propose(lease, a, "same")
    assert again.id == first.id and again.fencing_token == first.fencing_token
    assert Effect.objects.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("shift_s", [-600, 600])
def test_shifting_the_application_clock_changes_no_lease_outcome(agent, monkeypatch, shift_s):
    import django.utils.timezone as tz

    real_time, real_now = time.time, tz.now
    monkeypatch.setattr(time, "time", lambda: real_time() + shift_s)
    monkeypatch.setattr(
        tz, "now", lambda: real_now() + __import__("datetime").timedelta(seconds=shift_s)
    )
    admit(f"skew-{shift_s}", ttl_ms=9_000)
    a, _ = agent()
    grant = ls.lease_acquire(work_key=f"skew-{shift_s}", executor=a)
    assert 8_000 < grant.expires_in_ms <= 9_000
    r = ls.lease_renew(lease_id=grant.lease.id, executor=a, epoch=1)
    assert r.certainty == "active" and 8_000 < r.expires_in_ms <= 9_000
    e = fx.effect_propose(
        lease_id=grant.lease.id,
        executor=a,
        epoch=1,
        kind="k",
        target="t",
        idempotency_key=f"s{shift_s}",
    )
    assert e.decision == "authorized"
    # The stored times are the database's, whatever Python's clock says.
    with connection.cursor() as cur:
        cur.execute("SELECT (extract(epoch from now()) * 1000)::bigint")
        db_now = cur.fetchone()[0]
    grant.lease.refresh_from_db()
    assert abs(grant.lease.renewed_at_ms - db_now) < 5_000


@pytest.mark.django_db
def test_the_lifetime_cap_ends_renewals(agent, db_clock):
    a, _ = agent()
    lease = leased_item(a, key="cap-1", ttl_ms=3_000, max_lifetime_ms=4_000)
    db_clock.advance(2_000)
    r = ls.lease_renew(lease_id=lease.id, executor=a, epoch=1)
    # Capped at granted + 4 s (about 2 s from now), not now + 3 s.
    assert 1_500 < r.expires_in_ms <= 2_000
    db_clock.advance(2_000)
    with pytest.raises(LeaseExpired):
        ls.lease_renew(lease_id=lease.id, executor=a, epoch=1)


@pytest.mark.django_db
def test_batch_renew_answers_per_lease(agent):
    a, _ = agent()
    b, _ = agent()
    leases = []
    for i in range(5):
        admit(f"batch-{i}")
        leases.append(ls.lease_acquire(work_key=f"batch-{i}", executor=a).lease)
    admit("batch-other")
    other = ls.lease_acquire(work_key="batch-other", executor=b).lease
    results = ls.lease_renew_many(
        executor=a,
        items=[(x.id, x.epoch) for x in leases] + [(other.id, 1), ("nope", 1), (leases[0].id, 7)],
    )
    assert [r.ok for r in results] == [True] * 5 + [False, False, False]
    assert [r.code for r in results[5:]] == ["not_holder", "not_found", "stale_epoch"]


@pytest.mark.django_db
def test_a_lazy_expiry_opens_the_same_single_alert_a_sweep_would(agent, db_clock):
    from leaseboard.sweeps.services import sweep_run

    a, _ = agent()
    b, _ = agent()
    lease = leased_item(a, key="lazy-1", ttl_ms=3_000)
    db_clock.advance(3_001)
    ls.lease_acquire(work_key="lazy-1", executor=b)  # expires the first lease on the spot
    sweep_run()
    alerts = Alert.objects.filter(lease=lease)
    assert [(x.kind, x.epoch) for x in alerts] == [("expired", 1)]
    assert LeaseEvent.objects.filter(lease=lease, kind="expired").count() == 1


def acquire_into(out: dict, key: str, executor) -> None:  # type: ignore[no-untyped-def]
    """Thread body: acquire and keep the lease (or the error) in `out`."""
    try:
        out["lease"] = ls.lease_acquire(work_key=key, executor=executor).lease
    except Exception as exc:  # surfaced by the test's assertions
        out["error"] = exc
    finally:
        connections.close_all()


@pytest.mark.django_db(transaction=True)
def test_a_grant_that_waited_for_the_lock_is_dated_after_its_predecessor_ended(agent):
    """The database clock is read after the locks: a grant whose transaction began before
    its predecessor was released must not be dated before that release."""
    from django.db import transaction

    admit("order-1")
    a, _ = agent()
    b, _ = agent()
    first = ls.lease_acquire(work_key="order-1", executor=a).lease
    locked, release_lock = threading.Event(), threading.Event()
    grant: dict = {}

    def hold_item_lock():  # type: ignore[no-untyped-def]
        with transaction.atomic():
            WorkItem.objects.select_for_update().get(key="order-1")
            locked.set()
            release_lock.wait(10)
        connections.close_all()

    holder = threading.Thread(target=hold_item_lock)
    holder.start()
    locked.wait(10)
    waiter = threading.Thread(target=acquire_into, args=(grant, "order-1", b))
    waiter.start()
    wait_until_someone_waits_for_a_lock()  # the acquire, on the work item's row
    ls.lease_release(lease_id=first.id, executor=a, epoch=1)
    release_lock.set()
    holder.join()
    waiter.join()
    assert "error" not in grant, grant
    first.refresh_from_db()
    assert grant["lease"].epoch == 2
    assert grant["lease"].granted_at_ms >= first.ended_at_ms


@pytest.mark.django_db(transaction=True)
def test_a_grant_that_waited_on_the_ending_lease_is_dated_after_that_end(agent):
    """The acquire saw a live lease, then waited for its row while it was being released."""
    from django.db import transaction

    admit("order-2")
    a, _ = agent()
    b, _ = agent()
    first = ls.lease_acquire(work_key="order-2", executor=a).lease
    grant: dict = {}

    def release_slowly(locked, finish):  # type: ignore[no-untyped-def]
        with transaction.atomic():
            lease = Lease.objects.select_for_update().get(id=first.id)
            locked.set()
            finish.wait(10)
            ls.lease_end_locked(
                lease=lease, state="released", now_ms=db_now_ms(), reason="released"
            )

    # The acquire waits on the lease's row; 50 ms lets the clock move past its first reading.
    race_on_a_lock(release_slowly, lambda: acquire_into(grant, "order-2", b), settle_s=0.05)
    assert "error" not in grant, grant
    first.refresh_from_db()
    assert first.state == "released" and grant["lease"].epoch == 2
    assert grant["lease"].granted_at_ms >= first.ended_at_ms


@pytest.mark.django_db
@pytest.mark.parametrize("materialized_by_sweep", [False, True])
def test_an_expired_lease_holds_the_work_for_its_lock_delay(agent, db_clock, materialized_by_sweep):
    from leaseboard.domain.errors import LockDelay
    from leaseboard.sweeps.services import sweep_run

    admit("delay-1", ttl_ms=3_000, lock_delay_ms=5_000)
    a, _ = agent()
    b, _ = agent()
    ls.lease_acquire(work_key="delay-1", executor=a)
    db_clock.advance(3_001)
    if materialized_by_sweep:
        sweep_run()
    with pytest.raises(LockDelay) as info:
        ls.lease_acquire(work_key="delay-1", executor=b)
    assert 4_000 < info.value.extra["retry_after_ms"] <= 5_000
    assert WorkItem.objects.get(key="delay-1").epoch == 1
    db_clock.advance(5_000)
    assert ls.lease_acquire(work_key="delay-1", executor=b).lease.epoch == 2


@pytest.mark.django_db
def test_a_released_lease_has_no_lock_delay(agent):
    admit("delay-2", lock_delay_ms=5_000)
    a, _ = agent()
    b, _ = agent()
    first = ls.lease_acquire(work_key="delay-2", executor=a).lease
    ls.lease_release(lease_id=first.id, executor=a, epoch=1)
    assert ls.lease_acquire(work_key="delay-2", executor=b).lease.epoch == 2
