"""dev.py for a newcomer (issue 28, point 8): a busy PORT is a clear error naming the port
and PORT=, with exit status 1 and nothing started; --help lists every variable and command;
`dev.py reset` deletes the demo's data, saying what, and nothing else (tests/e2e/test_demo.py
runs it on a real demo's data directory, while the demo runs and after)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_busy_port_stops_the_demo_before_anything_starts():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "dev.py", "demo"],
            cwd=ROOT,
            env={**os.environ, "PORT": str(port)},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert f"port {port} on 127.0.0.1 is in use" in done.stdout
    assert "PORT=8001 python3 dev.py demo" in done.stdout
    assert "nothing was started" in done.stdout and "Leaseboard is running" not in done.stdout
    assert "starting" not in done.stdout and "migrat" not in done.stdout.lower()


def test_help_lists_every_variable_the_commands_read():
    done = subprocess.run(
        [sys.executable, "dev.py", "--help"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0
    assert "python3 dev.py reset" in done.stdout
    source = (ROOT / "dev.py").read_text()
    for name in (
        "PORT",
        "LEASEBOARD_DATA_DIR",
        "DEBUG",
        "DATABASE_URL",
        "CELERY_BROKER_URL",
        "REDIS_URL",
        "LEASEBOARD_TEST_WORKERS",
        "TEST_DATABASE_NAME",
        "TEST_REDIS_URL",
        "CI",
    ):
        assert name in done.stdout, name
    # Every variable dev.py itself reads is among them.
    import re

    read = set(re.findall(r'env(?:iron)?\.get\("([A-Z_]+)"', source))
    read |= set(re.findall(r'os\.environ\.get\("([A-Z_]+)"', source))
    assert read and all(name in done.stdout for name in read), read


def reset(data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    return subprocess.run(
        [sys.executable, "dev.py", "reset"],
        cwd=ROOT,
        env={**env, "LEASEBOARD_DATA_DIR": str(data_dir)},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_reset_says_what_it_deletes_deletes_the_demos_data_and_keeps_the_rest(tmp_path):
    data = tmp_path / "data"
    (data / "broker" / "queue").mkdir(parents=True)
    (data / "broker" / "queue" / "msg").write_text("{}")
    (data / "demo" / "logs").mkdir(parents=True)
    (data / "demo" / "users.json").write_text("{}")
    for name in ("leaseboard.sqlite3", "leaseboard.sqlite3-wal", "celerybeat-schedule"):
        (data / name).write_bytes(b"x")
    for name in ("secret_key", "audit-key", "fencing-kek"):
        (data / name).write_text("k")
    (data / "my-notes.txt").write_text("not the demo's")
    done = reset(data)
    assert done.returncode == 0, done.stdout + done.stderr
    said = done.stdout
    assert f"deleting the demo's data in {data}:" in said
    for name in ("leaseboard.sqlite3", "leaseboard.sqlite3-wal", "broker/", "demo/"):
        assert f"[dev]   {name}\n" in said, (name, said)
    # What it deletes is said before it is deleted, and what is not the demo's stays.
    assert said.index("broker/") < said.index("kept (not the demo's): my-notes.txt")
    assert sorted(p.name for p in data.iterdir()) == ["my-notes.txt"]
    assert (data / "my-notes.txt").read_text() == "not the demo's"
    again = reset(data)
    assert again.returncode == 0 and "nothing to delete" in again.stdout


def test_reset_refuses_while_a_demo_runs_on_the_data_directory(tmp_path):
    data = tmp_path / "data"
    (data / "demo").mkdir(parents=True)
    (data / "leaseboard.sqlite3").write_bytes(b"x")
    # A live process's pid in the demo's pid file (dev.py demo writes its own there).
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as running:
        try:
            (data / "demo" / "dev.pid").write_text(str(running.pid))
            done = reset(data)
        finally:
            running.kill()
    assert done.returncode == 1
    assert f"a demo is running on {data} (pid {running.pid})" in done.stdout
    assert "deleted nothing" in done.stdout and (data / "leaseboard.sqlite3").exists()


def test_every_file_the_settings_keep_in_the_data_directory_is_one_reset_knows() -> None:
    import fnmatch
    import re

    settings = "\n".join(
        path.read_text() for path in sorted((ROOT / "leaseboard" / "settings").glob("*.py"))
    )
    kept = set(re.findall(r'DATA_DIR / "([^"]+)"', settings))
    assert {"leaseboard.sqlite3", "broker", "secret_key", "fencing-kek"} <= kept, kept
    source = (ROOT / "dev.py").read_text()
    known = re.search(r"DEMO_DATA = \((.*?)\n\)", source, re.S)
    assert known is not None
    patterns = re.findall(r'"([^"]+)"', known.group(1))
    for name in kept:
        assert any(fnmatch.fnmatch(name, pattern) for pattern in patterns), name
