"""A write probe: one thread that commits a numbered row every 100 ms through one way of
reaching the primary (HAProxy, or libpq multi-host with `target_session_attrs=read-write`),
each write bounded by a client-side deadline (a frozen server holds a connection open
forever: the write runs in a thread of its own, which is abandoned at the deadline and its
outcome counted unknown, never a success). Figures: the longest gap between two
acknowledged writes (the write outage) and the gaps around each fault; afterwards
`lost(url)` says how many acknowledged rows the final primary does not have.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field

TABLE = "ha_probe"


def create_table(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {TABLE} (path text NOT NULL, n bigint NOT NULL, "
            "at timestamptz NOT NULL DEFAULT clock_timestamp(), PRIMARY KEY (path, n))"
        )


@dataclass
class Probe:
    path: str  # "haproxy", "multihost"
    url: str
    deadline_s: float = 2.0
    interval_s: float = 0.1
    fresh: bool = False  # a new connection for every write (as a new web worker would)
    acked: list[tuple[int, float]] = field(default_factory=list)  # (n, monotonic time)
    unknown: int = 0
    failed: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Probe:
        self.thread = threading.Thread(target=self._run, name=f"probe-{self.path}", daemon=True)
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)

    def _run(self) -> None:
        conn_box: list = [None]
        n = 0
        while not self.stop.is_set():
            n += 1
            done = threading.Event()
            outcome: list[bool] = []
            writer = threading.Thread(
                target=self._write, args=(conn_box, n, outcome, done), daemon=True
            )
            writer.start()
            if not done.wait(self.deadline_s):
                self.unknown += 1
                conn_box[0] = None  # abandoned to its hung thread
            elif outcome and outcome[0]:
                self.acked.append((n, time.monotonic()))
            else:
                self.failed += 1
            self.stop.wait(self.interval_s)

    def _write(self, box: list, n: int, outcome: list[bool], done: threading.Event) -> None:
        import psycopg

        try:
            conn = box[0]
            if conn is None or conn.closed or self.fresh:
                conn = psycopg.connect(self.url, autocommit=True, connect_timeout=2)
                box[0] = conn
            conn.execute(f"INSERT INTO {TABLE} (path, n) VALUES (%s, %s)", (self.path, n))
            outcome.append(not done.is_set())
            if self.fresh:
                conn.close()
        except psycopg.Error:
            if box[0] is not None:
                with contextlib.suppress(Exception):
                    box[0].close()
            box[0] = None
            outcome.append(False)
        finally:
            done.set()

    def gap_around(self, t: float, until: float | None = None) -> float | None:
        """The write outage a fault at monotonic time `t` caused: the longest gap between
        two acknowledged writes that ends after `t` and by `until` (the next fault, which
        starts only once the cluster is healthy again; a write in flight can still commit
        just after a SIGKILL of the postmaster, whose backends notice its death a moment
        later, so the gap need not begin before `t`)."""
        times = [at for _, at in self.acked]
        gaps = [
            b - a
            for a, b in zip(times, times[1:], strict=False)
            if b > t and (until is None or b <= until)
        ]
        return max(gaps) if gaps else None

    def max_gap(self) -> float:
        times = [at for _, at in self.acked]
        return max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)

    def lost(self, url: str) -> int:
        """Acknowledged rows the database at `url` (the final primary) does not have."""
        import psycopg

        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            have = {
                r[0] for r in conn.execute(f"SELECT n FROM {TABLE} WHERE path = %s", (self.path,))
            }
        return sum(1 for n, _ in self.acked if n not in have)
