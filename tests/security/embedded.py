"""Run Leaseboard embedded (SQLite in a data directory, generated audit key, checkpoints
beside it) through manage.py in a subprocess, and act as the owner of its SQLite file."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.processes import python_in_repo


def outside_env() -> dict[str, str]:
    """This process's environment without what configures Leaseboard or the test run: a
    fresh start-up decides everything from what a test adds."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LEASEBOARD_", "PYTEST", "DJANGO_"))
        and k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"}
    }


def embedded_env(data: Path) -> dict[str, str]:
    return {
        **outside_env(),
        "LEASEBOARD_DATA_DIR": str(data),
        "LEASEBOARD_TESTING": "1",
        "DEBUG": "false",
    }


def manage(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return python_in_repo(["manage.py", *args], env=embedded_env(data), timeout=120)


def manage_check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`manage.py check` in a fresh process with exactly `env`: start-up's own checks."""
    return python_in_repo(["manage.py", "check"], env=env, timeout=60)


def production_check(
    data: Path, env: dict[str, str], **extra: str
) -> subprocess.CompletedProcess[str]:
    """`manage_check` as production starts (DEBUG off, a real-length secret key, data in
    `data`) from `env` with `extra` added."""
    return manage_check(
        {**env, "DEBUG": "false", "LEASEBOARD_DATA_DIR": str(data), "SECRET_KEY": "x" * 60, **extra}
    )


def sqlite_path(data: Path) -> Path:
    return data / "leaseboard.sqlite3"


def sqlite_rows(data: Path, sql: str) -> list[tuple]:
    """The rows `sql` reads from the SQLite file in `data`, as its owner reads them."""
    db = sqlite3.connect(sqlite_path(data))
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


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
