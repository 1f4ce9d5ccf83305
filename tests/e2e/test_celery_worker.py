"""A real Celery worker with embedded beat on a real Redis broker, against the test
database. This is the one sweep test that waits on the wall clock: the real beat has to
tick. Everything else moves time through stored times or the clock seam."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection

from leaseboard.core.models import Alert, Lease
from leaseboard.core.services import leases as ls
from leaseboard.core.services.work import work_admit
from leaseboard.sweeps.models import SweepState

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
INTERVAL_S = 0.5


def _test_database_url() -> str:
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def _worker_env(redis_url: str, data_dir: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=_test_database_url(),
        CELERY_BROKER_URL=redis_url,
        LEASEBOARD_CELERY_QUEUE=f"lb-test-{uuid.uuid4().hex[:8]}",  # isolated from others
        LEASEBOARD_SWEEP_INTERVAL_S=str(INTERVAL_S),
        LEASEBOARD_DATA_DIR=str(data_dir),
        LEASEBOARD_DB_CLOCK_OFFSET_MS="0",
        DB_CONN_MAX_AGE="0",
        LOG_LEVEL="WARNING",
    )
    env.update(extra)
    return env


def _celery(*args: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "leaseboard", *args]


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_and_beat_move_a_silent_lease_to_jeopardy_then_expired(
    agent, redis_url, tmp_path
):
    log = open(tmp_path / "worker.log", "w+")
    worker = subprocess.Popen(
        _celery("worker", "-B", "-P", "solo", "--without-mingle", "--without-gossip", "-l", "INFO"),
        cwd=ROOT,
        env=_worker_env(redis_url, tmp_path),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        # The worker is up once the first beat-scheduled sweep has stamped the sweep clock.
        deadline = time.monotonic() + 30
        while not SweepState.objects.exists():
            assert worker.poll() is None, _tail(log)
            assert time.monotonic() < deadline, "no sweep within 30 s\n" + _tail(log)
            time.sleep(0.1)

        executor, _ = agent()
        work_admit(key="silent-1", timing={"ttl_ms": 3000}, by=None)
        grant = ls.lease_acquire(work_key="silent-1", executor=executor)
        ls.lease_renew(lease_id=grant.lease.id, executor=executor, epoch=grant.lease.epoch)
        # ...and then the agent stops renewing.
        lease_id = grant.lease.id

        deadline = time.monotonic() + 15
        while Lease.objects.get(id=lease_id).state != "expired":
            assert worker.poll() is None, _tail(log)
            assert time.monotonic() < deadline, "lease never expired\n" + _tail(log)
            time.sleep(0.1)

        lease = Lease.objects.get(id=lease_id)
        alerts = {a.kind: a for a in Alert.objects.filter(lease_id=lease_id)}
        assert sorted(alerts) == ["expired", "jeopardy"]
        assert Alert.objects.filter(lease_id=lease_id).count() == 2
        two_intervals_ms = 2 * INTERVAL_S * 1000
        jeopardy, expired = alerts["jeopardy"], alerts["expired"]
        assert jeopardy.due_at_ms == lease.jeopardy_at_ms
        assert expired.due_at_ms == lease.expires_at_ms
        assert 0 <= jeopardy.opened_at_ms - jeopardy.due_at_ms <= two_intervals_ms
        assert 0 <= expired.opened_at_ms - expired.due_at_ms <= two_intervals_ms
    finally:
        _stop(worker)
        log.close()


@pytest.mark.django_db(transaction=True)
def test_a_worker_refuses_to_start_when_visibility_timeout_is_below_the_time_limit(
    redis_url, tmp_path
):
    env = _worker_env(
        redis_url,
        tmp_path,
        LEASEBOARD_BROKER_VISIBILITY_TIMEOUT_S="30",
        LEASEBOARD_TASK_TIME_LIMIT_S="60",
    )
    result = subprocess.run(
        _celery("worker", "-P", "solo", "--without-mingle", "--without-gossip"),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "refusing to start the worker" in result.stderr + result.stdout
    assert "visibility_timeout" in result.stderr + result.stdout
    assert "LEASEBOARD_BROKER_VISIBILITY_TIMEOUT_S" in result.stderr + result.stdout


def _stop(worker: subprocess.Popen) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(10)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(5)


def _tail(log) -> str:  # type: ignore[no-untyped-def]
    log.flush()
    log.seek(0)
    return log.read()[-4000:]
