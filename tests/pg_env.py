"""Loaded with `-p tests.pg_env` (pyproject addopts) before Django settings are read, so
the test run points DATABASE_URL at a real PostgreSQL when one is reachable.

Under pytest-xdist each worker process gets its own PostgreSQL test database (pytest-django
suffixes the test database's name with the worker id: `test_leaseboard_gw1`) and, set here,
its own Redis logical database: TEST_REDIS_URL's database number minus the worker's index,
modulo 16 (Redis' default number of databases): the default /15 gives /15, /14, ..., down
and away from /0, which an application on the same Redis uses by default. xdist sets
PYTEST_XDIST_WORKER in the worker's environment before the worker reads its command line,
so it is there when this plugin is imported."""

from __future__ import annotations

import os
import re
import socket
from urllib.parse import urlparse

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
# "gw0", "gw1", ... in an xdist worker; "" in a serial run and in the xdist controller.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
WORKER_INDEX = int(XDIST_WORKER[2:]) if re.fullmatch(r"gw\d+", XDIST_WORKER) else 0
REDIS_DATABASES = 16


def worker_redis_url(url: str, index: int) -> str:
    """`url` with its database number moved down by `index` (wrapping at 16)."""
    if not index:
        return url
    parsed = urlparse(url)
    path = parsed.path.strip("/")
    base = int(path) if path.isdigit() else 0
    return parsed._replace(path=f"/{(base - index) % REDIS_DATABASES}").geturl()


PG_URL = os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/leaseboard"
REDIS_URL = worker_redis_url(
    os.environ.get("TEST_REDIS_URL") or "redis://127.0.0.1:6379/15", WORKER_INDEX
)
if XDIST_WORKER:
    # Tests (and the processes they start) that read TEST_REDIS_URL see this worker's own.
    os.environ["TEST_REDIS_URL"] = REDIS_URL


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
        os.environ.get("TMPDIR", "/tmp"),
        f"leaseboard-test{'-' + XDIST_WORKER if XDIST_WORKER else ''}.sqlite3",
    )
os.environ["LEASEBOARD_TESTING"] = "1"
# The live server answers each request on a new thread; a persistent connection per thread
# would outlive the test and keep the test database from being dropped.
os.environ.setdefault("DB_CONN_MAX_AGE", "0")
# The suite's own bounds are generous: a loaded 2-core CI machine must not turn a slow test
# into a 503. Tests of the bounds set them (tests/faults/).
for _name, _value in (
    ("LEASEBOARD_DB_STATEMENT_TIMEOUT_MS", "60000"),
    ("LEASEBOARD_DB_LOCK_TIMEOUT_MS", "30000"),
    ("LEASEBOARD_API_DEADLINE_MS", "60000"),
    ("LEASEBOARD_PAGE_DEADLINE_MS", "60000"),
):
    os.environ.setdefault(_name, _value)
