"""Run Leaseboard embedded (SQLite in a data directory, generated audit key, checkpoints
beside it) through manage.py in a subprocess, and act as the owner of its SQLite file."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def embedded_env(data: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LEASEBOARD_", "PYTEST", "DJANGO_"))
        and k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"}
    }
    env.update(LEASEBOARD_DATA_DIR=str(data), LEASEBOARD_TESTING="1", DEBUG="false")
    return env


def manage(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=embedded_env(data),
        capture_output=True,
        text=True,
        timeout=120,
    )


def sqlite_path(data: Path) -> Path:
    return data / "leaseboard.sqlite3"


@contextlib.contextmanager
def sqlite_owner(data: Path) -> Iterator[sqlite3.Cursor]:
    """Whoever owns the file: drops the append-only triggers and writes what it likes."""
    db = sqlite3.connect(sqlite_path(data))
    try:
        db.execute("DROP TRIGGER IF EXISTS core_auditentry_no_update")
        db.execute("DROP TRIGGER IF EXISTS core_auditentry_no_delete")
        yield db.cursor()
        db.commit()
    finally:
        db.close()
