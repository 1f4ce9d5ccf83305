"""Failing fast on the database (docs/design.md §14): the connection's connect, statement and lock
timeouts, the long bounds sweeps and config apply take for their own transactions, the
breaker, and the watchdog that cuts a request's connection at its deadline (on a real
PostgreSQL connection here; tests/faults freezes a server of its own)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import psycopg
import pytest
from django.db import OperationalError, connection, transaction

from leaseboard.core.dbfaults import CUTS_TO_OPEN, Breaker, long_bounds, unavailable_reason
from leaseboard.core.deadline import Watchdog
from leaseboard.envconf import database_from_url
from tests.pg_env import PG_URL
from tests.waiting import wait_until

pytestmark = pytest.mark.postgres


def test_a_database_url_gets_the_hot_paths_bounds_unless_it_names_its_own(monkeypatch):
    for name in ("STATEMENT", "LOCK"):
        monkeypatch.delenv(f"LEASEBOARD_DB_{name}_TIMEOUT_MS", raising=False)
    options = database_from_url("postgres://u@h/db")["OPTIONS"]
    assert options["connect_timeout"] == 2
    assert "-c statement_timeout=1500" in options["options"]
    assert "-c lock_timeout=1000" in options["options"]
    own = database_from_url(
        "postgres://u@h/db?connect_timeout=5&options=-c%20statement_timeout%3D9000"
    )["OPTIONS"]
    assert own["connect_timeout"] == "5" and "statement_timeout=1500" not in own["options"]
    assert "-c statement_timeout=9000" in own["options"] and "lock_timeout=1000" in own["options"]
    monkeypatch.setenv("LEASEBOARD_DB_STATEMENT_TIMEOUT_MS", "0")  # off: the server's own
    assert "statement_timeout" not in database_from_url("postgres://u@h/db")["OPTIONS"]["options"]


def _show(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SHOW {name}")
        return str(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_long_bounds_hold_for_their_transaction_only(settings):
    settings.LEASEBOARD_DB_LONG_STATEMENT_TIMEOUT_MS = 120_000
    settings.LEASEBOARD_DB_LONG_LOCK_TIMEOUT_MS = 20_000
    before = (_show("statement_timeout"), _show("lock_timeout"))
    with transaction.atomic():
        long_bounds()
        assert (_show("statement_timeout"), _show("lock_timeout")) == ("2min", "20s")
    assert (_show("statement_timeout"), _show("lock_timeout")) == before


def test_the_breaker_opens_on_an_unreachable_database_not_on_a_slow_statement(settings):
    settings.LEASEBOARD_DB_RETRY_AFTER_S = 0.2
    breaker = Breaker()
    slow = psycopg.errors.QueryCanceled("canceling statement due to statement timeout")
    breaker.failed(slow)
    assert breaker.allow() and unavailable_reason(slow) == "statement_timeout"
    breaker.failed(OperationalError("connection refused"))
    assert not breaker.allow() and not breaker.allow()
    # One request tries again once the interval has passed...
    wait_until(breaker.allow, what="the breaker lets a request try again", timeout_s=5)
    assert not breaker.allow()  # ...the others still answer at once
    breaker.succeeded()
    assert breaker.allow() and breaker.allow()


def test_one_deadline_cut_does_not_open_the_breaker_a_run_of_them_does(settings):
    # A cut request met a slow server or a frozen one; only a run of cuts with nothing
    # answered in between says frozen. Opening on the first turned overload into 503s.
    settings.LEASEBOARD_DB_RETRY_AFTER_S = 0.2
    breaker = Breaker()
    cut = OperationalError("consuming input failed: the watchdog shut the socket")
    for _ in range(CUTS_TO_OPEN - 1):
        breaker.failed(cut, deadline=True)
    assert breaker.allow() and breaker.opened == 0
    breaker.succeeded()  # a request answered: the run starts again
    for _ in range(CUTS_TO_OPEN - 1):
        breaker.failed(cut, deadline=True)
    assert breaker.allow() and breaker.opened == 0
    breaker.failed(cut, deadline=True)
    assert not breaker.allow() and breaker.opened == 1
    # Cuts end no generation: the other threads' connections were slow, not dead.
    assert breaker.generation == 0
    breaker.failed(OperationalError("connection refused"))
    assert breaker.generation == 1


def _raw() -> psycopg.Connection:
    """A connection of its own to the server (its `postgres` database): only a socket."""
    base = PG_URL.replace("postgres://", "postgresql://").rsplit("/", 1)[0]
    return psycopg.connect(f"{base}/postgres", autocommit=True)


def test_the_watchdog_cuts_a_statement_running_past_its_deadline():
    watchdog = Watchdog()
    conn = _raw()
    db = SimpleNamespace(connection=conn, autocommit=True, in_atomic_block=False)
    deadline = watchdog.enter(0.5, db)
    started = time.monotonic()
    with pytest.raises(psycopg.OperationalError):
        conn.execute("SELECT pg_sleep(10)")
    took = time.monotonic() - started
    watchdog.leave(deadline)
    assert deadline.fired and deadline.phase == "statement" and watchdog.cuts == 1
    assert 0.4 < took < 5, took
    assert conn.closed


def test_a_cut_between_an_atomic_blocks_end_and_its_commit_says_the_outcome_is_unknown():
    watchdog = Watchdog()
    conn = _raw()
    # What Django's wrapper looks like while it commits the outermost atomic block.
    db = SimpleNamespace(connection=conn, autocommit=False, in_atomic_block=False)
    deadline = watchdog.enter(0.3, db)
    with pytest.raises(psycopg.OperationalError):
        conn.execute("SELECT pg_sleep(10)")
    watchdog.leave(deadline)
    assert deadline.fired and deadline.phase == "commit"


def test_a_request_that_left_in_time_is_never_cut():
    watchdog = Watchdog()
    conn = _raw()
    db = SimpleNamespace(connection=conn, autocommit=True, in_atomic_block=False)
    deadline = watchdog.enter(0.2, db)
    conn.execute("SELECT 1")
    watchdog.leave(deadline)
    # A later deadline of the same watchdog firing shows it went past the first one's time.
    later_conn = _raw()
    later_db = SimpleNamespace(connection=later_conn, autocommit=True, in_atomic_block=False)
    later = watchdog.enter(0.3, later_db)
    wait_until(lambda: later.fired, what="the later deadline fired", timeout_s=10)
    watchdog.leave(later)
    assert not deadline.fired and conn.execute("SELECT 2").fetchone() == (2,)
    later_conn.close()
    conn.close()


@pytest.mark.django_db
def test_a_connection_made_after_its_requests_deadline_passed_is_refused():
    # A request waiting to connect to a frozen server has no socket to cut; if the server
    # thaws just then, the connection it finally gets must not carry it past its deadline.
    from django.db import connections

    watchdog = Watchdog()
    db = connections.create_connection("default")
    deadline = watchdog.enter(0.05, db)
    wait_until(lambda: deadline.fired, what="the deadline fired", timeout_s=10)
    assert db.connection is None
    with pytest.raises(OperationalError, match="deadline passed while it connected"):
        db.ensure_connection()
    watchdog.leave(deadline)
    assert db.connection is None
    db.ensure_connection()  # the next request's connection is not refused
    db.close()


@pytest.mark.django_db(transaction=True)
def test_once_the_database_is_back_no_thread_fails_on_a_connection_from_before(settings):
    # Two request threads each keep a persistent connection; the server restarts under them
    # (both backends terminated). One thread finds out (503, the breaker opens) and, after
    # the interval, finds the database back. The other thread's next request must be
    # answered from the database, not fail once more on its dead socket (before the fix it
    # did, and reopened the breaker for every thread).
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connections
    from django.test import Client

    from leaseboard.core.dbfaults import breaker
    from leaseboard.core.services.executors import agent_create

    settings.LEASEBOARD_DB_RETRY_AFTER_S = 0.2
    settings.LEASEBOARD_API_DEADLINE_MS = 5000
    _, token = agent_create(name="agent-restart", queues=["default"], actor_name="test")
    threads = [ThreadPoolExecutor(max_workers=1) for _ in range(2)]
    counter = iter(range(100))

    def call() -> tuple[int, int]:
        answer = Client().post(
            "/api/v1/work-items",
            {"key": f"restart-{next(counter)}"},
            content_type="application/json",
            headers={"authorization": f"Bearer {token}"},
        )
        db = connections["default"]
        return answer.status_code, (db.connection.info.backend_pid if db.connection else 0)

    def on(thread: int) -> tuple[int, int]:
        return threads[thread].submit(call).result(timeout=30)

    try:
        (first, pid1), (second, pid2) = on(0), on(1)
        assert first in (200, 201) and second in (200, 201) and pid1 != pid2
        with _raw() as side:
            side.execute("SELECT pg_terminate_backend(p) FROM unnest(%s::int[]) p", [[pid1, pid2]])
        generation = breaker.generation
        assert on(0)[0] == 503 and breaker.generation > generation  # found out, breaker open
        wait_until(lambda: on(0)[0] in (200, 201), what="the database answers again", timeout_s=10)
        status, pid = on(1)
        assert status in (200, 201) and pid not in (pid1, pid2)
    finally:
        for thread in threads:
            thread.submit(connections.close_all).result(timeout=30)
            thread.shutdown()
