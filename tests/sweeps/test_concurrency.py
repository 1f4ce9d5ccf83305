"""Concurrent and killed sweeps on real PostgreSQL: every transition and alert exactly once.

Data is committed (transactional_db) so forked processes and threads see it. Time moves by
aging stored times in SQL.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time

import pytest
from django.db import connection, connections

from leaseboard.core.models import Alert, Lease, LeaseEvent
from leaseboard.sweeps import services
from tests.builders import age_leases, bulk_leases

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

N_LEASES = 10_000


def _sweep_until_idle(batch_size: int) -> tuple[int, int, int]:
    """One 'beat': sweep until a sweep finds nothing left to claim."""
    totals = [0, 0, 0]
    try:
        while True:
            report = services.sweep_run(batch_size=batch_size)
            totals[0] += report.jeopardy
            totals[1] += report.expired
            totals[2] += len(report.alert_ids)
            if report.jeopardy + report.expired + report.skipped == 0:
                return totals[0], totals[1], totals[2]
    finally:
        connections.close_all()


def _process_main(batch_size: int, out) -> None:  # type: ignore[no-untyped-def]
    try:
        out.put(_sweep_until_idle(batch_size))
    except BaseException as exc:  # reported to the parent, which fails the test
        out.put(repr(exc))
    finally:
        os._exit(0)  # never run pytest's teardown in a forked child


def _race_eight_sweeps(batch_size: int = 200) -> list[tuple[int, int, int]]:
    """Four threads and four forked processes sweep at once: duplicated beats, many workers."""
    connections.close_all()  # a forked child must not share the parent's socket
    ctx = multiprocessing.get_context("fork")
    out = ctx.SimpleQueue()  # put() writes synchronously: safe before os._exit
    procs = [ctx.Process(target=_process_main, args=(batch_size, out)) for _ in range(4)]
    results: list = []
    lock = threading.Lock()

    def thread_main() -> None:
        try:
            got = _sweep_until_idle(batch_size)
        except BaseException as exc:
            got = repr(exc)  # type: ignore[assignment]
        with lock:
            results.append(got)

    threads = [threading.Thread(target=thread_main) for _ in range(4)]
    for p in procs:
        p.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    while not out.empty():
        results.append(out.get())
    assert len(results) == 8
    assert all(isinstance(r, tuple) for r in results), results
    return results


@pytest.mark.django_db(transaction=True)
def test_eight_concurrent_sweeps_over_ten_thousand_leases_make_every_transition_once(agent):
    executor, _ = agent()
    bulk_leases(N_LEASES, prefix="c8-", holder=executor, jeopardy_in_ms=-100, expires_in_ms=60_000)
    results = _race_eight_sweeps()
    assert sum(r[0] for r in results) == N_LEASES  # jeopardy transitions, summed over sweepers
    assert sum(r[2] for r in results) == N_LEASES  # alerts opened
    assert Lease.objects.filter(state="jeopardy").count() == N_LEASES
    assert LeaseEvent.objects.filter(kind="jeopardy").count() == N_LEASES
    assert Alert.objects.filter(kind="jeopardy").count() == N_LEASES
    assert sum(1 for r in results if r[0]) >= 2, "the sweepers should have shared the work"

    age_leases(120_000)
    results = _race_eight_sweeps()
    assert sum(r[1] for r in results) == N_LEASES
    assert Lease.objects.filter(state="expired").count() == N_LEASES
    assert LeaseEvent.objects.filter(kind="expired").count() == N_LEASES
    assert Alert.objects.filter(kind="expired").count() == N_LEASES
    assert Alert.objects.filter(kind="jeopardy", resolved_at_ms__isnull=True).count() == 0
    # One alert per (lease, kind, epoch), and one expiry event per lease.
    assert Alert.objects.values("lease_id", "kind").distinct().count() == 2 * N_LEASES
    assert LeaseEvent.objects.filter(kind="expired").values("lease_id").distinct().count() == (
        N_LEASES
    )


def _killed_sweep(batch_size: int) -> None:
    calls = {"n": 0}

    def die_in_second_batch(claimed):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 2:  # first batch committed; second claimed and locked, not written
            os.kill(os.getpid(), signal.SIGKILL)

    try:
        services.sweep_run(batch_size=batch_size, before_write=die_in_second_batch)
    finally:
        os._exit(3)  # not reached when the kill lands


@pytest.mark.django_db(transaction=True)
def test_a_sweep_killed_mid_batch_leaves_nothing_for_the_next_sweep_to_wait_out(agent):
    executor, _ = agent()
    bulk_leases(1500, prefix="k-", holder=executor, jeopardy_in_ms=-100, expires_in_ms=60_000)
    connections.close_all()
    child = multiprocessing.get_context("fork").Process(target=_killed_sweep, args=(500,))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    assert Lease.objects.filter(state="jeopardy").count() == 500  # the committed first batch

    with connection.cursor() as cur:
        cur.execute("SET lock_timeout = '1s'")  # any wait on a dead sweep's lock would fail
    started = time.monotonic()
    report = services.sweep_run(batch_size=500)
    elapsed = time.monotonic() - started
    assert report.jeopardy == 1000
    assert elapsed < 5, f"the next sweep took {elapsed:.1f}s"
    assert Lease.objects.filter(state="jeopardy").count() == 1500
    assert Alert.objects.filter(kind="jeopardy").count() == 1500
    assert LeaseEvent.objects.filter(kind="jeopardy").count() == 1500
