"""Recipient-side fencing on real PostgreSQL and Redis: the high-water mark never lets an
older epoch through, under thousands of concurrent interleavings, and the in-transaction
form commits (or rolls back) the mark together with the recipient's write.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from leaseboard.domain.fencing import (
    FencingClaims,
    generate_private_key,
    jwks,
    key_id,
    public_key_raw,
    sign_token,
)
from leaseboard.recipient import (
    EpochGuard,
    FencingMiddleware,
    InMemoryEpochGuard,
    MemoryReporter,
    PostgresEpochGuard,
    RecipientReporter,
    RedisEpochGuard,
    Refusal,
    TokenVerifier,
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
    # CI must not silently skip the tests that prove safety (DESIGN §10).
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


# -- token verification, reports and the HTTP forms --------------------------------------

KEY = generate_private_key()
KID = key_id(public_key_raw(KEY))
NOW = 1_700_000_000_000


def token_for(work_key: str, epoch: int, *, key: bytes = KEY, expires: int = NOW + 15_000) -> str:
    claims = FencingClaims(
        work_key=work_key,
        epoch=epoch,
        lease_id=str(uuid.uuid4()),
        holder="agent-1",
        issued_at_ms=NOW - 1_000,
        expires_at_ms=expires,
        kid=key_id(public_key_raw(key)),
    )
    return sign_token(claims, private_key_raw=key)


def make_verifier(**kwargs: Any) -> tuple[TokenVerifier, MemoryReporter]:
    reporter = MemoryReporter()
    options: dict[str, Any] = {
        "recipient": "payments",
        "public_keys": {KID: public_key_raw(KEY)},
        "guard": InMemoryEpochGuard(),
        "reporter": reporter,
        "clock_ms": lambda: NOW,
    }
    options.update(kwargs)
    return TokenVerifier(**options), reporter


def test_the_verifier_accepts_current_and_refuses_stale_tokens_and_reports_them() -> None:
    verifier, reporter = make_verifier()
    assert verifier.check(token_for("pay-1", 2), work_key="pay-1", epoch=2).accepted
    stale = verifier.check(token_for("pay-1", 1), work_key="pay-1")
    assert (stale.accepted, stale.code, stale.high_water, stale.epoch) == (
        False,
        "stale_epoch",
        2,
        1,
    )
    forged = verifier.check(token_for("pay-1", 9, key=generate_private_key()), work_key="pay-1")
    assert forged.code == "unknown_key"
    wrong = verifier.check(token_for("pay-2", 3), work_key="pay-1")
    assert wrong.code == "wrong_work"
    expired = verifier.check(token_for("pay-1", 3, expires=NOW), work_key="pay-1")
    assert expired.code == "expired"
    mismatch = verifier.check(token_for("pay-1", 2), work_key="pay-1", epoch=3)
    assert mismatch.code == "malformed"
    assert [r.reason for r in reporter.refusals] == [
        "stale_epoch",
        "unknown_key",
        "wrong_work",
        "expired",
        "malformed",
    ]
    first = reporter.refusals[0]
    assert (first.work_key, first.epoch, first.high_water, first.recipient) == (
        "pay-1",
        1,
        2,
        "payments",
    )
    # A missing token claims no standing: refused, not reported.
    assert verifier.check(None, work_key="pay-1").code == "malformed"
    assert len(reporter.refusals) == 5


def test_an_unknown_kid_triggers_one_rate_limited_jwks_refresh() -> None:
    new_key = generate_private_key()
    published: dict[str, bytes] = {KID: public_key_raw(KEY)}
    fetches = []
    clock = [0.0]

    def fetch(url: str) -> dict:
        fetches.append(url)
        return jwks(published)

    verifier, _ = make_verifier(
        public_keys=None,
        jwks_url="http://leaseboard.test/api/v1/fencing/keys",
        fetch=fetch,
        monotonic=lambda: clock[0],
    )
    assert verifier.check(token_for("k", 1), work_key="k").accepted
    assert len(fetches) == 1
    published[key_id(public_key_raw(new_key))] = public_key_raw(new_key)  # rotation
    clock[0] = 31.0
    assert verifier.check(token_for("k", 2, key=new_key), work_key="k").accepted
    assert len(fetches) == 2
    # Forged kids do not make us hammer the server: one fetch per interval at most.
    for _ in range(5):
        assert verifier.check(token_for("k", 3, key=generate_private_key()), work_key="k").code == (
            "unknown_key"
        )
    assert len(fetches) == 2
    # Retiring a key on the server stops it verifying here after the next refresh.
    del published[KID]
    assert verifier.refresh_keys()
    assert verifier.check(token_for("k", 4), work_key="k").code == "unknown_key"


class _Capture(BaseHTTPRequestHandler):
    received: list[tuple[str, str, dict]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Capture.received.append((self.path, self.headers["Authorization"], body))
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_the_reporter_posts_the_refusal_body_with_a_bearer_token() -> None:
    server = HTTPServer(("127.0.0.1", 0), _Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        reporter = RecipientReporter(
            base_url=f"http://127.0.0.1:{server.server_port}/", token="s3cret"
        )
        long_token = "x" * 5000
        reporter.report(
            Refusal(
                work_key="pay-1",
                epoch=1,
                high_water=2,
                reason="stale_epoch",
                recipient="payments",
                token=long_token,
                detail="older",
            )
        )
        assert reporter.flush(5)
        reporter.close()
    finally:
        server.shutdown()
        server.server_close()
    path, auth, body = _Capture.received[-1]
    assert path == "/api/v1/recipient-reports" and auth == "Bearer s3cret"
    assert set(body) == {
        "work_key",
        "epoch",
        "high_water",
        "reason",
        "recipient",
        "token",
        "detail",
    }
    assert body["reason"] == "stale_epoch" and len(body["token"]) < len(long_token)


def test_a_failed_report_never_breaks_the_recipient() -> None:
    reporter = RecipientReporter(base_url="http://127.0.0.1:9", token="t", background=False)
    verifier, _ = make_verifier(reporter=reporter)
    assert verifier.check(token_for("k", 2), work_key="k").accepted
    assert verifier.check(token_for("k", 1), work_key="k").code == "stale_epoch"
    assert reporter.failed == 1
    # Nothing to file without a work key (the server needs one): skipped, not failed.
    reporter.report(Refusal(None, None, None, "malformed", "payments"))
    assert reporter.failed == 1


def _call_wsgi(app: Any, headers: dict[str, str], method: str = "POST") -> tuple[str, dict | bytes]:
    environ = {"REQUEST_METHOD": method, "PATH_INFO": "/pay"}
    environ.update({"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()})
    seen: dict[str, Any] = {}
    body = b"".join(app(environ, lambda status, hdrs: seen.update(status=status, headers=hdrs)))
    if dict(seen["headers"]).get("Content-Type") == "application/problem+json":
        return seen["status"], json.loads(body)
    return seen["status"], body


def test_the_wsgi_middleware_refuses_with_problem_details() -> None:
    verifier, reporter = make_verifier()

    def app(environ: dict, start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        claims = environ.get("leaseboard.fencing")
        return [f"paid under epoch {claims.epoch}".encode() if claims else b"read"]

    fenced = FencingMiddleware(app, verifier=verifier)
    new = {"X-Fencing-Token": token_for("pay-1", 5), "X-Lease-Epoch": "5", "X-Work-Key": "pay-1"}
    assert _call_wsgi(fenced, new) == ("200 OK", b"paid under epoch 5")
    old = {"X-Fencing-Token": token_for("pay-1", 4), "X-Lease-Epoch": "4", "X-Work-Key": "pay-1"}
    status, problem = _call_wsgi(fenced, old)
    assert status == "409 Conflict"
    assert problem == {
        "type": "urn:leaseboard:problem:stale_epoch",
        "title": problem["title"],
        "status": 409,
        "code": "stale_epoch",
        "detail": problem["detail"],
        "current_epoch": 5,
        "your_epoch": 4,
    }
    status, problem = _call_wsgi(fenced, {**new, "X-Fencing-Token": new["X-Fencing-Token"][:-6]})
    assert status == "403 Forbidden" and problem["code"] == "forged"
    status, problem = _call_wsgi(fenced, {**new, "X-Lease-Epoch": "five"})
    assert status == "403 Forbidden" and problem["code"] == "malformed"
    assert _call_wsgi(fenced, {}, method="GET") == ("200 OK", b"read")  # reads are not fenced
    assert [r.reason for r in reporter.refusals] == ["stale_epoch", "forged"]


def test_the_django_decorator_refuses_a_stale_epoch() -> None:
    from django.conf import settings

    if not settings.configured:
        settings.configure(DEFAULT_CHARSET="utf-8", ALLOWED_HOSTS=["*"], USE_TZ=True)
    from django.http import HttpResponse
    from django.test import RequestFactory

    from leaseboard.recipient.django_guard import fenced

    verifier, reporter = make_verifier()

    @fenced(verifier)
    def pay(request: Any) -> HttpResponse:
        return HttpResponse(f"paid {request.fencing.epoch}")

    factory = RequestFactory()
    ok = pay(
        factory.post("/pay", headers={"X-Fencing-Token": token_for("p", 3), "X-Work-Key": "p"})
    )
    assert ok.status_code == 200 and ok.content == b"paid 3"
    stale = pay(
        factory.post("/pay", headers={"X-Fencing-Token": token_for("p", 2), "X-Work-Key": "p"})
    )
    assert stale.status_code == 409
    assert json.loads(stale.content)["current_epoch"] == 3
    assert stale["Content-Type"] == "application/problem+json"
    assert reporter.refusals[-1].reason == "stale_epoch"
