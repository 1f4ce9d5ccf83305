"""Two transactions racing for one row lock on real PostgreSQL: one holds the lock, the
other is made to wait for it, then the first finishes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import connection, connections


def wait_until_someone_waits_for_a_lock() -> None:
    for _ in range(200):
        with connection.cursor() as cur:
            cur.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()"
            )
            if cur.fetchone()[0]:
                return
        time.sleep(0.01)
    raise AssertionError("nothing ever waited for a lock")


def race_on_a_lock(
    hold: Callable[[threading.Event, threading.Event], Any],
    wait: Callable[[], Any],
    *,
    settle_s: float = 0.0,
) -> None:
    """Run `hold(locked, finish)` on a thread: it takes its lock, sets `locked`, waits for
    `finish`, then ends its transaction. Once it holds the lock, run `wait` on a second
    thread; once that waits for a lock, let `settle_s` pass (so the database clock moves
    past the waiter's first reading), set `finish` and join both. Each thread closes its
    database connections when it ends; each function keeps its own results and errors."""
    locked, finish = threading.Event(), threading.Event()

    def closing(body: Callable[..., Any], *args: Any) -> threading.Thread:
        def run() -> None:
            try:
                body(*args)
            finally:
                connections.close_all()

        return threading.Thread(target=run)

    holder = closing(hold, locked, finish)
    holder.start()
    locked.wait(10)
    waiter = closing(wait)
    waiter.start()
    wait_until_someone_waits_for_a_lock()
    time.sleep(settle_s)
    finish.set()
    holder.join()
    waiter.join()
