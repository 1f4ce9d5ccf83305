"""A PostgreSQL 15 primary and a streaming standby of the test's own (initdb into a temp
dir, the standby made by pg_basebackup), with synchronous replication: enough to force the
windows docs/design.md §5 names without Patroni. `pg_ctl promote` is the failover.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.servers import PG_BIN, OwnPostgres, _as_postgres

STANDBY_NAME = "standby1"

# Appended after bench.servers' scratch settings: commits must really wait for the standby.
SYNC_CONF = (
    "\nsynchronous_commit = on\nfull_page_writes = on\nwal_level = replica\n"
    "max_wal_senders = 5\nwal_sender_timeout = 60s\n"
)


def timeline_now(url: str) -> dict[str, Any]:
    """What a just-promoted server says its timeline is, by the two candidate sources."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        row = conn.execute(
            "SELECT pg_is_in_recovery(), substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8), "
            "(pg_control_checkpoint()).timeline_id"
        ).fetchone()
    assert row is not None
    return {"in_recovery": row[0], "wal_timeline": int(row[1], 16), "checkpoint_timeline": row[2]}


class Primary(OwnPostgres):
    """A primary that waits for `synchronous_standby_names` (set with `require_standby`)."""

    def _initdb(self) -> None:
        super()._initdb()
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(SYNC_CONF)

    def sql(self, statement: str, db: str = "postgres") -> Any:
        import psycopg

        with psycopg.connect(self.url(db), autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(statement)
            return cursor.fetchall() if cursor.description else None

    def require_standby(self, names: str) -> None:
        """Every commit from now on waits for a standby in `names` ('' : none)."""
        self.sql(f"ALTER SYSTEM SET synchronous_standby_names = '{names}'")
        self.sql("SELECT pg_reload_conf()")
        deadline = time.monotonic() + 10
        while self.sql("SHOW synchronous_standby_names")[0][0] != names:
            if time.monotonic() > deadline:
                raise RuntimeError("synchronous_standby_names did not take effect")
            time.sleep(0.05)

    def sync_waiters(self) -> list[int]:
        """Client backends waiting for the synchronous standby's acknowledgement of their
        commit (not autovacuum's, whose ANALYZE may wait too)."""
        rows = self.sql(
            "SELECT pid FROM pg_stat_activity "
            "WHERE wait_event = 'SyncRep' AND backend_type = 'client backend'"
        )
        return [int(r[0]) for r in rows]

    def cancel_sync_waits(
        self, *, within_s: float = 20.0, stop: threading.Event | None = None
    ) -> list[int]:
        """Poll for a commit waiting in SyncRep and cancel it (pg_cancel_backend): its
        client is told it committed (with a WARNING) though no standby has it."""
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline and not (stop and stop.is_set()):
            pids = self.sync_waiters()
            if pids:
                for pid in pids:
                    self.sql(f"SELECT pg_cancel_backend({pid})")
                return pids
            time.sleep(0.02)
        return []


class Standby(OwnPostgres):
    """A streaming standby of `primary`, by pg_basebackup; it commits alone once promoted
    (as Patroni does without synchronous_mode_strict)."""

    def __init__(self, primary: OwnPostgres) -> None:
        self.primary = primary
        super().__init__(Path(tempfile.mkdtemp(prefix="lb-own-pg-standby-")))

    def _initdb(self) -> None:
        if self.data.exists():
            shutil.rmtree(self.data)
        conninfo = (
            f"host=127.0.0.1 port={self.primary.port} user=postgres application_name={STANDBY_NAME}"
        )
        import os

        if os.geteuid() == 0:
            shutil.chown(self.root, user="postgres")
        subprocess.run(
            _as_postgres(
                [str(PG_BIN / "pg_basebackup"), "-D", str(self.data), "-R", "-X", "stream"]
                + ["-c", "fast", "-d", conninfo]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write("\nsynchronous_standby_names = ''\n")
        auto = self.data / "postgresql.auto.conf"
        # The primary's ALTER SYSTEM lines came along in the copy: a standby names none.
        lines = [
            line
            for line in auto.read_text().splitlines()
            if not line.startswith("synchronous_standby_names")
        ]
        auto.write_text("\n".join(lines) + "\n")

    def promote(self) -> float:
        """`pg_ctl promote -w`; the seconds it took."""
        started = time.monotonic()
        subprocess.run(
            _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-w", "promote"]),
            check=True,
            capture_output=True,
            timeout=60,
        )
        return time.monotonic() - started

    def replay_caught_up(self, primary_url: str, timeout: float = 20) -> None:
        """Wait until this standby has replayed everything the primary has written."""
        import psycopg

        with psycopg.connect(primary_url, autocommit=True) as conn:
            row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        assert row is not None
        target = row[0]
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.url(), autocommit=True) as conn:
            while True:
                done = conn.execute(
                    "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [target]
                ).fetchone()
                if done and done[0]:
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError("the standby did not catch up")
                time.sleep(0.05)
