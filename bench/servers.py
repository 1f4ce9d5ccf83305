"""A PostgreSQL and a Redis of one's own, for runs and tests that stop, freeze or kill them
(`make faults`, tests/faults/): never the machine's shared servers. Each gets a free port
and a data directory in a fresh temporary folder, removed by `close()`.

PostgreSQL refuses to run as root: as root, initdb and pg_ctl run as the `postgres` user
(`runuser`), in a folder that user can enter. `freeze()`/`thaw()` SIGSTOP/SIGCONT the
postmaster and every backend (a hung host as the clients see it: TCP still answered by
the kernel, nothing else). No Django import here.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import free_port, port_open, wait_until

PG_BIN = Path(
    os.environ.get("LEASEBOARD_PG_BIN")
    or next(
        (str(p) for p in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)),
        "/usr/lib/postgresql/15/bin",
    )
)


def pg_statements_reset(cursor: Any) -> None:
    """Start pg_stat_statements' counts afresh (a psycopg or a Django cursor)."""
    cursor.execute("SELECT pg_stat_statements_reset()")


def pg_top_statements(cursor: Any, n: int = 10, *, width: int = 160) -> list[dict[str, Any]]:
    """Where the database's time went since the last reset: the `n` statements by total
    execution time, each query's text on one line cut at `width` characters."""
    cursor.execute(
        "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), %s), calls, "
        "round(total_exec_time::numeric, 1), round(mean_exec_time::numeric, 2), rows "
        "FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT %s",
        [width, n],
    )
    return [
        {"query": q, "calls": c, "total_ms": float(t), "mean_ms": float(m), "rows": r}
        for q, c, t, m, r in cursor.fetchall()
    ]


def _as_postgres(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


class OwnPostgres:
    def __init__(self, root: Path | None = None, conf: str = "") -> None:
        """`conf`: lines appended to postgresql.conf after the small defaults below."""
        self.conf = conf
        self.root = Path(root or tempfile.mkdtemp(prefix="lb-own-pg-"))
        self.root.chmod(0o755)
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self.port = free_port()
        self._initdb()

    def _initdb(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.root, user="postgres")
        subprocess.run(
            _as_postgres(
                [str(PG_BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
        with open(self.data / "postgresql.conf", "a") as conf:
            # Small and quick: no fsync (a scratch cluster), a short checkpoint after a kill.
            conf.write(
                "\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
                "max_connections = 200\nshared_buffers = 32MB\n" + self.conf
            )

    def url(self, db: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{db}"

    def start(self, timeout: float = 60) -> None:
        opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"
        subprocess.run(
            _as_postgres(
                [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.log)]
                + ["-w", "-t", str(int(timeout)), "start"]
            ),
            check=True,
            capture_output=True,
            timeout=timeout + 10,
        )
        wait_until(self.accepts, "own PostgreSQL", timeout=timeout, interval=0.1)

    def stop(self, mode: str = "fast") -> None:
        """`pg_ctl stop -m fast`: open transactions are rolled back, clients disconnected."""
        self.thaw()
        subprocess.run(
            _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"]),
            capture_output=True,
            timeout=60,
        )

    def accepts(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.url(), connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def pids(self) -> list[int]:
        pidfile = self.data / "postmaster.pid"
        if not pidfile.exists():
            return []
        postmaster = int(pidfile.read_text().split()[0])
        children = subprocess.run(
            ["pgrep", "-P", str(postmaster)], capture_output=True, text=True
        ).stdout.split()
        return [postmaster, *(int(c) for c in children)]

    def _signal_all(self, sig: int) -> None:
        for pid in self.pids():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def freeze(self) -> None:
        self._signal_all(signal.SIGSTOP)

    def thaw(self) -> None:
        self._signal_all(signal.SIGCONT)

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def copy_schema(self, source_url: str, name: str) -> str:
        """A database `name` here with the schema (and the migration records) of the
        database at `source_url`: seconds, where `migrate` takes ten or more."""
        target = self.create_database(name)
        dump = subprocess.run(
            [str(PG_BIN / "pg_dump"), "--no-owner", "--schema-only", source_url],
            check=True,
            capture_output=True,
            timeout=120,
        ).stdout
        dump += subprocess.run(
            [str(PG_BIN / "pg_dump"), "--no-owner", "--data-only", "-t", "django_migrations"]
            + [source_url],
            check=True,
            capture_output=True,
            timeout=120,
        ).stdout
        subprocess.run(
            [str(PG_BIN / "psql"), "-q", "-v", "ON_ERROR_STOP=1", target],
            input=dump,
            check=True,
            capture_output=True,
            timeout=120,
        )
        return target

    def close(self) -> None:
        try:
            self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


class OwnReplica(OwnPostgres):
    """A streaming replica of an OwnPostgres (pg_basebackup -R: standby.signal and the
    primary's conninfo), on a port and in a folder of its own."""

    def __init__(self, primary: OwnPostgres, root: Path | None = None) -> None:
        self.primary = primary
        super().__init__(root)

    def _initdb(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.root, user="postgres")
        subprocess.run(
            _as_postgres(
                [str(PG_BIN / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.primary.port),
                 "-U", "postgres", "-D", str(self.data), "-R", "-X", "stream", "-c", "fast"]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )  # fmt: skip
        with open(self.data / "postgresql.conf", "a") as conf:
            # Report replay often: the dashboard's lag is read from it.
            conf.write("\nhot_standby = on\nwal_receiver_status_interval = 1s\n")

    def replay_paused(self, paused: bool) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True, connect_timeout=5) as conn:
            conn.execute(
                "SELECT pg_wal_replay_pause()" if paused else "SELECT pg_wal_replay_resume()"
            )


class OwnRedis:
    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root or tempfile.mkdtemp(prefix="lb-own-redis-"))
        self.port = free_port()
        self.pidfile = self.root / "redis.pid"
        self.proc: subprocess.Popen | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        log = open(self.root / "redis.log", "ab")
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
            + ["--appendonly", "no", "--dir", str(self.root), "--pidfile", str(self.pidfile)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        wait_until(lambda: port_open(self.port), "own Redis", timeout=30, interval=0.05)

    def redis_cli(self, *args: str) -> str:
        return subprocess.run(
            ["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True, timeout=10
        ).stdout.strip()

    def kill9(self) -> None:
        """SIGKILL: what it held in memory (queues, unacked messages) is gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        deadline = time.monotonic() + 10
        while port_open(self.port) and time.monotonic() < deadline:
            time.sleep(0.05)

    def close(self) -> None:
        try:
            self.kill9()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
