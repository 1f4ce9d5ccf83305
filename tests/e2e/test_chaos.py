"""The chaos test, reduced for CI: about 10 agents for ~25 s against real gunicorn, Celery
(worker + beat on Redis) and a recipient, with pauses past the ttl, abandoned leases,
SIGKILLed agent processes, a SIGKILLed worker and takeovers, but no PostgreSQL/Redis
restarts (they would break the rest of the session). It runs `python -m bench.chaos` in a
subprocess on its own databases, so pytest-django's test database is not involved."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.pg_env import PG_OK, REDIS_OK

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.skipif(not (PG_OK and REDIS_OK), reason="needs PostgreSQL and Redis"),
]


def own_names() -> tuple[str, str]:
    """This run's chaos database and Redis database, after the test run's own
    (TEST_DATABASE_NAME, TEST_REDIS_URL), so that two checkouts' suites running on one
    machine at once never share them."""
    database = (os.environ.get("TEST_DATABASE_NAME") or "leaseboard") + "_chaos_ci"
    path = urlparse(os.environ.get("TEST_REDIS_URL") or "redis://127.0.0.1:6379/12").path
    return database, path.strip("/") or "12"


def test_chaos_reduced(tmp_path: Path) -> None:
    out = tmp_path / "chaos.json"
    database, redis_db = own_names()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.chaos",
            "--duration",
            "24",
            "--agents",
            "10",
            "--ttl-ms",
            "3000",
            "--no-restarts",
            "--db",
            database,
            "--redis-db",
            redis_db,
            "--json",
            str(out),
        ],  # fmt: skip
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.exists(), run.stdout[-4000:] + run.stderr[-4000:]
    result = json.loads(out.read_text())
    report = run.stdout[-6000:]
    assert "error" not in result, result.get("error")
    checks = result["checks"]

    # Each check: it passed, what it forbids never happened, and what it watched did happen.
    for name, never, seen in (
        ("1_no_effect_below_high_water", "accepted_below_mark", "accepted"),
        ("2_one_live_holder", "overlaps", "pairs_checked"),
        ("3_attempts_in_ledger", "definite_missing", "definite"),
        ("4_expiry_alerted_once", "expired_without_alert", "expired_leases"),
    ):
        check = checks[name]
        assert check["ok"], report
        assert check.get(never, 0) == 0, (name, check)
        assert check[seen] > 0, (name, check)

    # The recipient that never hears from a successor: no late send accepted once a
    # successor could act, none past its lease's expiry (docs/design.md §5, docs/fencing.md).
    late = checks["5_late_sends_refused"]
    assert late.get("accepted_once_the_successor_could_act", 0) == 0, report
    assert late.get("late_sends_accepted", 0) == 0, report

    faults = result["faults"]
    for name in (
        "pauses",
        "abandoned",
        "agent_procs_killed",
        "worker_kills",
        "takeovers_approved",
        "zombie_server_refused",
    ):
        assert faults[name] > 0, f"fault {name} never happened\n{report}"
    # The server never authorized an effect under a lease that had lapsed during a pause.
    assert faults["zombie_server_authorized"] == 0
    assert faults["pg_restarts"] == 0 and faults["redis_restarts"] == 0
    assert result["ok"], report
    assert run.returncode == 0, report
