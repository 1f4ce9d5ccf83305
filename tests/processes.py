"""Leaseboard's own scripts (manage.py, dev.py) run in a fresh Python process from the
repository root, with exactly the environment a test gives and the output captured as text."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def python_in_repo(
    args: list[str], *, env: dict[str, str], timeout: float, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`python <args>` from the repository root with exactly `env` (and `stdin` as input)."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def manage_on_sqlite(
    db: Path, *args: str, stdin: str | None = None, **extra: str
) -> subprocess.CompletedProcess[str]:
    """manage.py as a start-up outside the test run (LEASEBOARD_TESTING unset, DEBUG on) on
    the SQLite database `db`, its data directory beside it, with `extra` in the environment."""
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{db}",
        "LEASEBOARD_DATA_DIR": str(db.parent),
        "DEBUG": "true",
        **extra,
    }
    env.pop("LEASEBOARD_TESTING", None)
    return python_in_repo(["manage.py", *args], env=env, timeout=300, stdin=stdin)
