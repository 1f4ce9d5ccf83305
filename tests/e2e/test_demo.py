"""The README's one-command demo, run as a new user would: no PostgreSQL, no Redis.

`python3 dev.py demo` on a free port with a fresh data directory must show live leases,
jeopardy alerts and late effects refused by the recipient (by epoch, or by time: a token
dies with the standing it proves) within a minute, then stop every child on SIGINT; and
`python3 dev.py reset` refuses while it runs, then deletes its data once it has stopped.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.processes import python_in_repo
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow]

SEEN = {
    "live leases": "SELECT count(*) FROM core_lease WHERE state IN ('active', 'jeopardy')",
    "jeopardy alerts": "SELECT count(*) FROM core_alert WHERE kind = 'jeopardy'",
    "refused late effects": (
        "SELECT count(*) FROM core_effect WHERE source = 'recipient' "
        "AND decision = 'refused' AND refusal_code IN ('stale_epoch', 'expired')"
    ),
    "sandbox payments": "SELECT count(*) FROM sandbox_payment WHERE status = 'accepted'",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def counts(db: Path) -> dict[str, int]:
    if not db.exists():
        return {}
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return {name: conn.execute(sql).fetchone()[0] for name, sql in SEEN.items()}
    except sqlite3.Error:
        return {}  # not migrated yet, or briefly locked


def descendants(pid: int) -> set[int]:
    """Every process whose ancestry leads to `pid` (via /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "python").exists(), reason="needs ./.venv")
def test_the_one_command_demo_shows_the_whole_story_and_stops_cleanly(tmp_path):
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "LEASEBOARD_TESTING"}
        and not k.startswith(("PYTEST", "DJANGO_"))
    }
    env.update(PORT=str(port), LEASEBOARD_DATA_DIR=str(tmp_path / "data"))
    log = (tmp_path / "demo.log").open("w")
    demo = subprocess.Popen(
        [sys.executable, "dev.py", "demo"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    db = tmp_path / "data" / "leaseboard.sqlite3"
    children: set[int] = set()
    seen: dict[str, int] = {}
    try:
        deadline = time.monotonic() + 75
        while time.monotonic() < deadline and demo.poll() is None:
            children |= descendants(demo.pid)
            seen = counts(db)
            if seen and all(seen.values()):
                break
            time.sleep(1)
        assert demo.poll() is None, (tmp_path / "demo.log").read_text()[-3000:]
        assert seen and all(seen.values()), f"after 75 s: {seen}"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            assert json.loads(r.read())["ok"] is True
        children |= descendants(demo.pid)
        # `dev.py reset` stops nothing: while the demo runs it refuses and deletes nothing.
        refused = reset(env)
        assert refused.returncode == 1, refused.stdout
        assert f"a demo is running on {tmp_path / 'data'} (pid {demo.pid})" in refused.stdout
        assert db.exists() and (tmp_path / "data" / "broker").is_dir()
    finally:
        if demo.poll() is None:
            demo.send_signal(signal.SIGINT)
        try:
            code = demo.wait(20)
        except subprocess.TimeoutExpired:
            demo.kill()
            raise
        log.close()
    assert code == 0
    # Reaped children vanish a moment after the demo's own exit: wait for that, not a time.
    wait_until(
        lambda: not any(alive(pid) for pid in children),
        what="every process of the demo gone after Ctrl-C",
        timeout_s=5,
        detail=lambda: f"still running: {sorted(pid for pid in children if alive(pid))}",
    )
    output = (tmp_path / "demo.log").read_text()
    assert "demo-operator" in output and f"http://127.0.0.1:{port}/" in output
    assert "fleet stopped:" in output and "stale_refused=" in output
    # The first ten minutes: the sign-ins again after start-up, and where they are kept.
    after_start = output.split("Leaseboard is running", 1)[1]
    users_file = tmp_path / "data" / "demo" / "users.json"
    for user, password in json.loads(users_file.read_text()).items():
        assert f"{user} / {password}" in after_start, user
    assert f"kept in {users_file}" in after_start
    # Requests are lines in the access log, not on the console; no tracebacks, no repeats.
    access = (tmp_path / "data" / "demo" / "logs" / "access.log").read_text()
    assert '"POST /api/v1/leases/' in access
    assert '"POST /api/v1/' not in output and "Traceback" not in output
    lines = [ln for ln in output.splitlines() if ln.strip() and not ln.startswith("fleet: ")]
    repeated = {ln for ln in lines if lines.count(ln) > 1}
    assert not repeated, repeated
    # Stopped, `dev.py reset` says what it deletes, deletes it, and the next demo starts fresh.
    done = reset(env)
    assert done.returncode == 0, done.stdout
    for name in ("leaseboard.sqlite3", "broker/", "demo/", "secret_key", "fencing-kek"):
        assert f"[dev]   {name}\n" in done.stdout, (name, done.stdout)
    assert not (tmp_path / "data").exists(), sorted((tmp_path / "data").iterdir())


def reset(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return python_in_repo(["dev.py", "reset"], env=env, timeout=30)
