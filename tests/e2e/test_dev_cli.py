"""dev.py for a newcomer (issue 28, point 8): a busy PORT is a clear error naming the port
and PORT=, with exit status 1 and nothing started; --help lists every variable."""

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
