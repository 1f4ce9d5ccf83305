from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.servers import OwnPostgres
from tests.faults.stack import Stack, migrated_db_url, own_servers_available


@pytest.fixture(scope="module")
def pg_stack(django_db_setup, django_db_blocker) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    """gunicorn on a PostgreSQL of this module's own (a filesystem broker: no Redis)."""
    if not own_servers_available():
        pytest.skip("needs PostgreSQL's initdb and redis-server to start servers of its own")
    tmp = Path(tempfile.mkdtemp(prefix="lb-faults-"))
    stack = Stack(tmp=tmp, pg=OwnPostgres())
    try:
        with django_db_blocker.unblock():
            source = migrated_db_url()
        stack.setup(source)
        stack.start_web()
        yield stack
    finally:
        stack.close()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def broker_stack(django_db_setup, django_db_blocker) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    """gunicorn and a Celery worker with beat (sweeps every 0.5 s) on a PostgreSQL and a
    Redis of this module's own."""
    if not own_servers_available():
        pytest.skip("needs PostgreSQL's initdb and redis-server to start servers of its own")
    from bench.servers import OwnRedis

    tmp = Path(tempfile.mkdtemp(prefix="lb-faults-"))
    stack = Stack(tmp=tmp, pg=OwnPostgres(), redis=OwnRedis())
    stack.extra_env = {"LEASEBOARD_SWEEP_INTERVAL_S": "0.5", "LEASEBOARD_SWEEPS_STALE_AFTER_S": "5"}
    try:
        stack.redis.start()  # type: ignore[union-attr]
        with django_db_blocker.unblock():
            source = migrated_db_url()
        stack.setup(source)
        stack.start_web()
        yield stack
    finally:
        stack.close()
        shutil.rmtree(tmp, ignore_errors=True)
