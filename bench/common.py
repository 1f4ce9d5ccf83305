"""What every bench script needs, written once: a printer, free ports, waiting for a server,
scratch databases, the Django environment, and starting and stopping gunicorn and other
process groups. Used by run_all.py, bench_sweep.py, bench_dashboard.py and bench/chaos/.
Imports no Django at module level (agents and the bare project import it without settings).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
PG = "postgres://postgres@127.0.0.1:5432"


BENCH_AUDIT_KEY = "bench-only-audit-key-" + secrets.token_hex(16)
BENCH_FENCING_KEK = "bench-only-fencing-kek-" + secrets.token_hex(16)


def sayer(tag: str) -> Callable[[str], None]:
    """A progress printer: `[tag HH:MM:SS] message`, flushed at once."""

    def say(msg: str) -> None:
        print(f"[{tag} {time.strftime('%H:%M:%S')}] {msg}", flush=True)

    return say


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), 0.5):
            return True
    except OSError:
        return False


def wait_until(
    ready: Callable[[], bool], what: str, timeout: float = 30, interval: float = 0.1
) -> None:
    deadline = time.time() + timeout
    while not ready():
        if time.time() > deadline:
            raise RuntimeError(f"{what} is not up after {timeout:.0f} s")
        time.sleep(interval)


def wait_port(port: int, what: str, timeout: float = 30) -> None:
    wait_until(lambda: port_open(port), what, timeout)


# --- databases and Django ------------------------------------------------------------------


def django_env(
    db_url: str,
    *,
    settings: str = "leaseboard.settings",
    drop: Iterable[str] = ("LEASEBOARD_TESTING",),
    **extra: str,
) -> dict[str, str]:
    """This process's environment for a Django child process on `db_url`."""
    env = dict(os.environ)
    for name in drop:
        env.pop(name, None)
    env.update(
        DATABASE_URL=db_url,
        DJANGO_SETTINGS_MODULE=settings,
        DEBUG="false",
        # Production settings need an audit key (docs/audit.md); one per bench run.
        LEASEBOARD_AUDIT_KEY=BENCH_AUDIT_KEY,
        # ... and the fencing keys' key-encryption key (docs/deployment.md, "Fencing keys").
        LEASEBOARD_FENCING_KEK=BENCH_FENCING_KEK,
        # Benchmarks and the chaos harness flood on purpose: lift the API rate limits.
        LEASEBOARD_RATE_LIMIT_ENABLED="false",
        PYTHONPATH=str(ROOT),
    )
    env.update(extra)
    return env


def recreate_database(*names: str) -> None:
    """Drop (forcing connections off) and create each database: a run starts from nothing."""
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        for name in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')


def ensure_database(url: str) -> None:
    """Create the database named by `url` unless it exists (benches that keep their data)."""
    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    admin = parsed._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def migrate(env: dict[str, str]) -> None:
    subprocess.run(
        [PY, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True
    )


def setup_django(**values: str) -> None:
    """Set up Django in this process with `values` in the environment."""
    os.environ.update(values)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaseboard.settings")
    import django

    django.setup()


# --- processes -----------------------------------------------------------------------------


def spawn(
    cmd: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    log: Path | None = None,
    cwd: Path = ROOT,
) -> subprocess.Popen:
    """Start `cmd` in `cwd` (ROOT) in its own process group (so a stop reaches its children
    too), its output appended to `log` when given."""
    out = open(log, "ab") if log else None  # the child inherits it
    return subprocess.Popen(
        list(cmd),
        cwd=cwd,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT if out else None,
        start_new_session=True,
    )


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def stop_group(proc: subprocess.Popen, timeout: float = 10) -> None:
    """SIGTERM the process group, SIGKILL it if it has not gone after `timeout` seconds."""
    if proc.poll() is not None:
        return
    signal_group(proc, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        signal_group(proc, signal.SIGKILL)
        proc.wait(5)


@dataclass
class Server:
    proc: subprocess.Popen
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop_group(self.proc)


def start_gunicorn(
    app: str,
    *,
    env: dict[str, str],
    workers: int,
    worker_class: str = "sync",
    threads: int = 0,
    extra: Sequence[str] = (),
    log: Path | None = None,
    what: str = "gunicorn",
    cwd: Path = ROOT,
    port: int | None = None,
) -> Server:
    """gunicorn serving `app` on a free loopback port; returns once every worker has loaded
    the application (bench/gunicorn_ready.py), not merely once the port accepts."""
    port = port or free_port()
    ready = Path(tempfile.mkdtemp(prefix="lb-gunicorn-ready-"))
    cmd = [
        PY, "-m", "gunicorn", app, "--workers", str(workers), "--worker-class", worker_class,
        "--bind", f"127.0.0.1:{port}", "--log-level", "warning",
        "--config", str(ROOT / "bench" / "gunicorn_ready.py"),
        *(["--threads", str(threads)] if threads else []), *extra,
    ]  # fmt: skip
    server = Server(spawn(cmd, env={**env, "BENCH_READY_DIR": str(ready)}, log=log, cwd=cwd), port)
    where = what + (f" (log: {log})" if log else "")
    try:
        wait_port(port, where)
        deadline = time.monotonic() + 120
        while len(list(ready.iterdir())) < workers:
            if server.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{where}: {workers} workers did not all boot")
            time.sleep(0.05)
    except RuntimeError:
        server.stop()
        raise
    finally:
        shutil.rmtree(ready, ignore_errors=True)
    return server
