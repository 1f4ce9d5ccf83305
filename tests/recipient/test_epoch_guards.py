"""Recipient-side fencing on real PostgreSQL and Redis: the high-water mark never lets an
older epoch through, under thousands of concurrent interleavings, and the in-transaction
form commits (or rolls back) the mark together with the recipient's write.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from leaseboard_recipient import (
    EpochGuard,
    InMemoryEpochGuard,
    PostgresEpochGuard,
    RedisEpochGuard,
    check_in,
)

PG_URL = os.environ.get(
    "RECIPIENT_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
REDIS_URL = (
    os.environ.get("RECIPIENT_TEST_REDIS_URL")
    or os.environ.get("TEST_REDIS_URL")
    or "redis://127.0.0.1:6379/15"
)
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def unavailable(what: str, exc: Exception) -> None:
    # CI must not silently skip the tests that prove safety (docs/design.md §10).
    message = f"{what} unreachable ({exc}); set CI=true to make this a failure"
    if IN_CI:
        pytest.fail(f"{what} unreachable in CI: {exc}")
    pytest.skip(message)


# -- fixtures ----------------------------------------------------------------------------


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A private schema `recipient_test_<hex>` in PG_URL, dropped afterwards."""
    import psycopg

    try:
        admin = psycopg.connect(PG_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        unavailable("PostgreSQL", exc)
    schema = f"recipient_test_{uuid.uuid4().hex[:10]}"
    admin.execute(f"CREATE SCHEMA {schema}")
    try:
        yield schema
    finally:
        admin.execute(f"DROP SCHEMA {schema} CASCADE")
        admin.close()


@pytest.fixture
def pg_guard(pg_schema: str) -> Iterator[PostgresEpochGuard]:
    guard = PostgresEpochGuard(PG_URL, table=f"{pg_schema}.epoch_guard")
    guard.ensure_schema()
    yield guard
    guard.close()


@pytest.fixture
def redis_guard() -> Iterator[RedisEpochGuard]:
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    try:
        client.ping()
    except redis.RedisError as exc:
        unavailable("Redis", exc)
    prefix = f"recipient_test:{uuid.uuid4().hex[:10]}:"
    yield RedisEpochGuard(client, prefix=prefix)
    for key in client.scan_iter(match=prefix + "*"):
        client.delete(key)
    client.close()


@pytest.fixture(
    params=[
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
        "memory",
    ]
)
def any_guard(request: pytest.FixtureRequest) -> EpochGuard:
    if request.param == "postgres":
        return request.getfixturevalue("pg_guard")
    if request.param == "redis":
        return request.getfixturevalue("redis_guard")
    return InMemoryEpochGuard()


# -- randomized concurrent interleavings -------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    work_key: str
    epoch: int
    accepted: bool
    high_water: int
    start_ns: int
    end_ns: int


def run_holders(
    attempt: Callable[[str, int], tuple[bool, int] | None],
    *,
    seed: int,
    threads: int = 8,
    ops: int = 400,
    keys: int = 3,
) -> list[Attempt]:
    """Threads act as current and old holders of a few work items while takeovers bump the
    epoch. `attempt` returns (accepted, high_water), or None if the recipient rolled back."""
    epochs = {f"work-{i}": 1 for i in range(keys)}
    epochs_lock = threading.Lock()
    log: list[Attempt] = []
    log_lock = threading.Lock()
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def holder(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        mine: list[Attempt] = []
        barrier.wait()
        try:
            for _ in range(ops):
                key = rng.choice(list(epochs))
                roll = rng.random()
                with epochs_lock:
                    if roll < 0.08:  # takeover: a new holder at a higher epoch
                        epochs[key] += 1
                    current = epochs[key]
                if roll > 0.65 and current > 1:  # an old holder that has not noticed yet
                    epoch = rng.randint(max(1, current - 3), current - 1)
                else:
                    epoch = current
                start = time.perf_counter_ns()
                outcome = attempt(key, epoch)
                end = time.perf_counter_ns()
                if outcome is not None:
                    mine.append(Attempt(key, epoch, outcome[0], outcome[1], start, end))
        except BaseException as exc:  # surfaced in the main thread below
            errors.append(exc)
        with log_lock:
            log.extend(mine)

    workers = [threading.Thread(target=holder, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not errors, errors
    return log


def assert_no_effect_below_the_high_water_mark(log: list[Attempt]) -> None:
    by_key: dict[str, list[Attempt]] = defaultdict(list)
    for item in log:
        by_key[item.work_key].append(item)
    for key, items in by_key.items():
        accepted = [a for a in items if a.accepted]
        accepted_epochs = {a.epoch for a in accepted}
        assert accepted and len(accepted) < len(items), f"{key}: the run exercised nothing"
        for a in items:
            if a.accepted:
                assert a.high_water == a.epoch, a
            else:
                # A refusal names a mark some accepted attempt really set, above our epoch.
                assert a.high_water > a.epoch, a
                assert a.high_water in accepted_epochs, a
        # Real-time order: once an accepted attempt has returned, no attempt that starts
        # later may be accepted with a lower epoch.
        by_end = sorted(accepted, key=lambda a: a.end_ns)
        seen_max, i = 0, 0
        for b in sorted(items, key=lambda a: a.start_ns):
            while i < len(by_end) and by_end[i].end_ns < b.start_ns:
                seen_max = max(seen_max, by_end[i].epoch)
                i += 1
            if b.accepted:
                assert b.epoch >= seen_max, f"{key}: epoch {b.epoch} accepted after {seen_max}"
            elif b.epoch >= seen_max:
                # Refused without a completed higher epoch before it: one must overlap it.
                assert any(a.epoch > b.epoch and a.start_ns < b.end_ns for a in accepted), (
                    f"{key}: epoch {b.epoch} refused with no higher epoch in sight"
                )


@pytest.mark.parametrize("seed", [1, 2])
def test_no_effect_is_accepted_below_the_high_water_mark(any_guard: EpochGuard, seed: int) -> None:
    def attempt(key: str, epoch: int) -> tuple[bool, int]:
        result = any_guard.check_and_advance(key, epoch)
        return result.accepted, result.high_water

    log = run_holders(attempt, seed=seed)
    assert len(log) == 8 * 400
    assert_no_effect_below_the_high_water_mark(log)
    for key in {a.work_key for a in log}:
        top = max(a.epoch for a in log if a.work_key == key and a.accepted)
        assert any_guard.high_water(key) == top  # type: ignore[attr-defined]


def test_an_equal_epoch_is_accepted_again_and_a_lower_one_refused(any_guard: EpochGuard) -> None:
    assert any_guard.check_and_advance("w", 4).accepted
    assert any_guard.check_and_advance("w", 4).accepted  # same holder, second effect
    refused = any_guard.check_and_advance("w", 3)
    assert (refused.accepted, refused.high_water) == (False, 4)
    assert any_guard.check_and_advance("w", 9).high_water == 9
    assert any_guard.check_and_advance("other", 1).accepted  # marks are per work item


@pytest.mark.parametrize("bad", [("", 1), ("w", -1), ("w", True), ("w", "3")])
def test_guards_refuse_nonsense_arguments(bad: tuple[Any, Any]) -> None:
    with pytest.raises(ValueError):
        InMemoryEpochGuard().check_and_advance(*bad)


# -- the in-transaction form on PostgreSQL -----------------------------------------------


def make_payments(pg_schema: str) -> str:
    import psycopg

    table = f"{pg_schema}.payments"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {table} (work_key text NOT NULL, seq int NOT NULL, epoch bigint "
            "NOT NULL, PRIMARY KEY (work_key, seq))"
        )
    return table


class RecipientRolledBack(Exception):
    pass


@pytest.mark.postgres
def test_the_reference_recipient_commits_its_write_and_the_mark_together(
    pg_guard: PostgresEpochGuard, pg_schema: str
) -> None:
    """The reference recipient: check_in, write, commit, all in one transaction. A tenth of
    the accepted writes then fail and roll back; their epochs must leave no trace."""
    import psycopg

    payments = make_payments(pg_schema)
    local = threading.local()
    rolled_back = []

    def attempt(key: str, epoch: int) -> tuple[bool, int] | None:
        if not hasattr(local, "conn"):
            local.conn = psycopg.connect(PG_URL)
            local.rng = random.Random(threading.get_ident())
        try:
            with local.conn.transaction(), local.conn.cursor() as cur:
                result = pg_guard.check_in(cur, key, epoch)
                if result.accepted:
                    # seq is the commit order: the guard row stays locked until we commit.
                    cur.execute(
                        f"INSERT INTO {payments} (work_key, seq, epoch) "
                        f"SELECT %s, coalesce(max(seq), 0) + 1, %s FROM {payments} "
                        "WHERE work_key = %s",
                        (key, epoch, key),
                    )
                    if local.rng.random() < 0.1:
                        raise RecipientRolledBack
                return result.accepted, result.high_water
        except RecipientRolledBack:
            rolled_back.append((key, epoch))
            return None

    log = run_holders(attempt, seed=3, threads=6, ops=300)
    assert rolled_back and log
    assert_no_effect_below_the_high_water_mark(log)
    with psycopg.connect(PG_URL) as conn:
        rows = conn.execute(f"SELECT work_key, seq, epoch FROM {payments} ORDER BY 1, 2").fetchall()
    committed: dict[str, list[int]] = defaultdict(list)
    for key, seq, epoch in rows:
        assert seq == len(committed[key]) + 1
        committed[key].append(epoch)
    accepted = defaultdict(int)
    for a in log:
        accepted[a.work_key] += a.accepted
    for key, epochs in committed.items():
        # The recipient's own log, in commit order, never goes back to an older epoch.
        assert epochs == sorted(epochs), f"{key}: {epochs}"
        assert len(epochs) == accepted[key]
        # Rolled-back epochs left no mark: the mark is the newest committed write.
        assert pg_guard.high_water(key) == epochs[-1]


@pytest.mark.postgres
def test_a_write_rolled_back_with_its_check_leaves_the_mark_unchanged(
    pg_guard: PostgresEpochGuard, pg_schema: str
) -> None:
    import psycopg

    payments = make_payments(pg_schema)
    assert pg_guard.check_and_advance("invoice-1", 3).accepted
    with psycopg.connect(PG_URL) as conn:
        with pytest.raises(RecipientRolledBack):
            with conn.transaction(), conn.cursor() as cur:
                assert check_in(cur, "invoice-1", 7, table=pg_guard.table).accepted
                cur.execute(f"INSERT INTO {payments} VALUES ('invoice-1', 1, 7)")
                raise RecipientRolledBack
        # A brand-new work key rolled back too: no row is left behind.
        with pytest.raises(RecipientRolledBack):
            with conn.transaction(), conn.cursor() as cur:
                assert check_in(cur, "invoice-2", 1, table=pg_guard.table).accepted
                raise RecipientRolledBack
        assert conn.execute(f"SELECT count(*) FROM {payments}").fetchone() == (0,)
    assert pg_guard.high_water("invoice-1") == 3
    assert pg_guard.high_water("invoice-2") is None
    assert pg_guard.check_and_advance("invoice-1", 5).accepted


@pytest.mark.postgres
def test_a_newer_epoch_waits_for_the_older_holders_transaction_to_commit(
    pg_guard: PostgresEpochGuard,
) -> None:
    """Why the check must share the write's transaction: epoch 6 cannot slip between epoch
    5's check and its write; it waits on the row lock, then wins."""
    import psycopg

    assert pg_guard.check_and_advance("deploy-9", 5).accepted
    older = psycopg.connect(PG_URL)
    newer = psycopg.connect(PG_URL, autocommit=True)
    results: list[Any] = []
    with older.transaction(), older.cursor() as cur:
        assert check_in(cur, "deploy-9", 5, table=pg_guard.table).accepted
        waiter = threading.Thread(
            target=lambda: results.append(
                check_in(newer.cursor(), "deploy-9", 6, table=pg_guard.table)
            )
        )
        waiter.start()
        pid = newer.info.backend_pid
        deadline = time.monotonic() + 10
        with psycopg.connect(PG_URL, autocommit=True) as watcher:
            while time.monotonic() < deadline:
                row = watcher.execute(
                    "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
                ).fetchone()
                if row and row[0] == "Lock":
                    break
            else:
                pytest.fail("epoch 6 did not wait for the open epoch-5 transaction")
        assert not results
    waiter.join(10)
    assert results and results[0].accepted and results[0].high_water == 6
    assert not pg_guard.check_and_advance("deploy-9", 5).accepted
    older.close()
    newer.close()


def test_table_names_are_checked_before_they_reach_sql() -> None:
    for bad in ("guard; DROP TABLE x", "a.b.c", "1abc", 'x"y'):
        with pytest.raises(ValueError):
            PostgresEpochGuard("postgresql://unused", table=bad)
