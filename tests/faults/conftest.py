from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.faults.stack import Stack, own_stack


@pytest.fixture(scope="module")
def pg_stack(django_db_setup, django_db_blocker) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    """gunicorn on a PostgreSQL of this module's own (a filesystem broker: no Redis)."""
    with own_stack(django_db_blocker, "lb-faults-") as stack:
        yield stack


@pytest.fixture(scope="module")
def broker_stack(django_db_setup, django_db_blocker) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    """gunicorn and a Celery worker with beat (sweeps every 0.5 s) on a PostgreSQL and a
    Redis of this module's own."""
    sweeps = {"LEASEBOARD_SWEEP_INTERVAL_S": "0.5", "LEASEBOARD_SWEEPS_STALE_AFTER_S": "5"}
    with own_stack(django_db_blocker, "lb-faults-", redis=True, extra_env=sweeps) as stack:
        yield stack
