"""Dashboard pages read from a real streaming replica (a PostgreSQL of the test's own, its
replica made with pg_basebackup), show its lag, and fall back to the primary past the bound
or when the replica does not answer (leaseboard.core.replicas). gunicorn serves the pages;
the replica's replay is paused to make it lag. Writes and sign-in stay on the primary."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from bench.servers import OwnReplica
from tests.faults.stack import Stack, own_stack
from tests.waiting import wait_until

# django_db: pytest-django then migrates the test database, whose schema the stack copies.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.postgres,
    pytest.mark.django_db,
    pytest.mark.xdist_group("ha"),
]
MAX_LAG_S = 4

ADMIT = """
from leaseboard.core.services.work import work_admit
work_admit(key=%r, queue_name="default", by=None)
"""


@pytest.fixture(scope="module")
def replica_stack(django_db_setup, django_db_blocker) -> Iterator[tuple[Stack, OwnReplica]]:  # type: ignore[no-untyped-def]
    with own_stack(django_db_blocker, "lb-replica-", web=False) as stack:
        replica = OwnReplica(stack.pg)
        stack.after_close.append(replica.close)
        replica.start()
        stack.extra_env = {
            "DATABASE_REPLICA_URL": replica.url("lb_faults"),
            "LEASEBOARD_REPLICA_MAX_LAG_S": str(MAX_LAG_S),
        }
        stack.start_web()
        yield stack, replica


def note(html: str) -> tuple[str, float | None, str]:
    """(where the page read, the lag it shows, its words) from the replica note."""
    found = re.search(
        r'id="replica-note"[^>]*data-reads="(\w+)" data-lag-s="([\d.]*)">([^<]+)<', html
    )
    assert found, html[-3000:]
    return found.group(1), float(found.group(2)) if found.group(2) else None, found.group(3)


def caught_up(replica: OwnReplica, key: str) -> bool:
    import psycopg

    with psycopg.connect(replica.url("lb_faults"), autocommit=True) as conn:
        return bool(conn.execute("SELECT 1 FROM core_workitem WHERE key = %s", [key]).fetchone())


def test_pages_read_from_the_replica_show_its_lag_and_fall_back_to_the_primary(
    replica_stack: tuple[Stack, OwnReplica],
) -> None:
    stack, replica = replica_stack
    client, _ = stack.signed_in()  # signing in writes: on the primary, with a replica set
    stack.run_django(ADMIT % "seen-by-both")
    wait_until(lambda: caught_up(replica, "seen-by-both"), what="the replica replays", timeout_s=20)

    page = client.get("/work/seen-by-both")
    assert page.status_code == 200
    reads, lag, words = note(page.text)
    assert reads == "replica" and lag is not None and lag < MAX_LAG_S, words
    assert re.fullmatch(r"Read from a replica, as of \d+\.\d s ago\.", words), words

    # An export streams after its view returned: its reads stay on the replica as it streams.
    export = client.get("/takeovers/interventions/export.csv")
    assert export.status_code == 200 and export.headers["content-type"].startswith("text/csv")
    assert export.text.splitlines()[0].startswith("id,")

    # Replay paused: a new item is on the primary only. While the lag is under the bound,
    # the page reads the replica (and does not find it)...
    replica.replay_paused(True)
    try:
        stack.run_django(ADMIT % "primary-only")
        early = client.get("/work/primary-only")
        # 404: read on the replica, which has not replayed it; else the machine was slow
        # enough that the lag had already passed the bound, and the page says so.
        assert early.status_code == 404 or note(early.text)[0] == "default"

        # ...and past the bound it reads the primary (and finds it), and says why.
        def found() -> httpx.Response | None:
            page = client.get("/work/primary-only")
            return page if page.status_code == 200 else None

        late = wait_until(found, what="a page read from the primary", timeout_s=30, interval_s=0.5)
        reads, lag, words = note(late.text)
        assert reads == "default" and lag is not None and lag > MAX_LAG_S, words
        assert words.startswith("Read from the primary: the replica is "), words
        assert f"more than the {MAX_LAG_S} s allowed" in words
    finally:
        replica.replay_paused(False)

    # A replica that does not answer: the primary, never a 503.
    replica.stop()
    try:
        down = client.get("/")
        assert down.status_code == 200
        reads, lag, words = note(down.text)
        assert (reads, lag, words) == (
            "default",
            None,
            "Read from the primary: the replica does not answer.",
        )
    finally:
        replica.start()
