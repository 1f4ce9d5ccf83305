"""Loaded with `-p tests.pg_env` (pyproject addopts) before Django settings are read, so
the test run points DATABASE_URL at a real PostgreSQL when one is reachable."""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
PG_URL = os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/leaseboard"
REDIS_URL = os.environ.get("TEST_REDIS_URL") or "redis://127.0.0.1:6379/15"


def reachable(url: str, default_port: int) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection(
            (parsed.hostname or "127.0.0.1", parsed.port or default_port), 2
        ):
            return True
    except OSError:
        return False


PG_OK = PG_URL.startswith("postgres") and reachable(PG_URL, 5432)
REDIS_OK = reachable(REDIS_URL, 6379)

if PG_OK:
    os.environ["DATABASE_URL"] = PG_URL
else:
    # Lets Django configure; every test that touches the database is skipped (or, in CI,
    # the run fails in tests/conftest.py).
    os.environ["DATABASE_URL"] = "sqlite:///" + os.path.join(
        os.environ.get("TMPDIR", "/tmp"), "leaseboard-test.sqlite3"
    )
os.environ["LEASEBOARD_TESTING"] = "1"
# The live server answers each request on a new thread; a persistent connection per thread
# would outlive the test and keep the test database from being dropped.
os.environ.setdefault("DB_CONN_MAX_AGE", "0")
