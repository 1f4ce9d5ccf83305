"""The processes a chaos run starts and stops: its databases, two gunicorn web servers, the
two recipients (everyone's, and the one that never hears from a successor), a Celery worker
with embedded beat; and PostgreSQL/Redis restarts with the
guarantee that both are left running whatever happened (`ensure_services`)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from bench.chaos import say
from bench.chaos.recipient import LATE_ROLES
from bench.common import (
    PG,
    PY,
    django_env,
    migrate,
    recreate_database,
    signal_group,
    spawn,
    start_gunicorn,
    stop_group,
    wait_until,
)

if TYPE_CHECKING:
    from bench.chaos.orchestrator import Config


class Services:
    def __init__(self, cfg: Config, tmp: Path) -> None:
        self.cfg = cfg
        self.tmp = tmp
        self.db_url = f"{PG}/{cfg.db}"
        self.recipient_db_url = f"{PG}/{cfg.recipient_db}"
        self.redis_url = f"redis://127.0.0.1:6379/{cfg.redis_db}"
        self.queue = f"lb-chaos-{uuid.uuid4().hex[:8]}"
        self.procs: dict[str, subprocess.Popen] = {}
        self.web_urls: list[str] = []
        self.recipient_url = ""
        self.late_recipient_urls: dict[str, str] = {}
        self.notice_secret_file = tmp / "late-notified-notice-secret"

    def env(self, **extra: str) -> dict[str, str]:
        values = {
            "LEASEBOARD_DATA_DIR": str(self.tmp / "data"),
            "CELERY_BROKER_URL": self.redis_url,
            "LEASEBOARD_CELERY_QUEUE": self.queue,
            "LEASEBOARD_SWEEP_INTERVAL_S": "0.5",
            "LEASEBOARD_TAKEOVER_MIN_STANDING_MS": "2000",
            "LOG_LEVEL": "ERROR",
            "CHAOS_RECIPIENT_DB": self.recipient_db_url,
            # The late_notified recipient's epoch-notice webhook listens on loopback.
            "LEASEBOARD_WEBHOOK_ALLOW_NETWORKS": "127.0.0.0/8,::1/128",
            **extra,
        }
        return django_env(self.db_url, drop=("LEASEBOARD_TESTING", "REDIS_URL"), **values)

    def create_databases(self) -> None:
        import psycopg

        from bench.chaos.recipient import SCHEMA

        recreate_database(self.cfg.db, self.cfg.recipient_db)
        migrate(self.env())
        with psycopg.connect(self.recipient_db_url, autocommit=True) as conn:
            for stmt in SCHEMA:
                conn.execute(stmt)

    def spawn(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
        proc = spawn(cmd, env=env, log=self.tmp / f"{name}.log")
        self.procs[name] = proc
        return proc

    def _gunicorn(
        self, name: str, app: str, env: dict[str, str], *, threads: int, extra: tuple = ()
    ) -> str:
        server = start_gunicorn(
            app, env=env, workers=2, worker_class="gthread", threads=threads, extra=extra,
            log=self.tmp / f"{name}.log", what=name,
        )  # fmt: skip
        self.procs[name] = server.proc
        return server.url

    def start_web(self) -> None:
        self.web_urls = [
            self._gunicorn(
                f"web{i}",
                "leaseboard.wsgi:application",
                self.env(),
                threads=4,
                extra=("--timeout", "30"),
            )  # fmt: skip
            for i in range(2)
        ]
        env = self.env(CHAOS_JWKS_URL=f"{self.web_urls[0]}/api/v1/fencing/keys")
        self.recipient_url = self._gunicorn(
            "recipient", "bench.chaos.recipient:application", env, threads=8
        )
        # The recipients that never hear from a successor: only late sends reach them; the
        # second also takes Leaseboard's epoch notices (once the secret file exists).
        for role in LATE_ROLES:
            late_env = {**env, "CHAOS_RECIPIENT_ROLE": role}
            if role == "late_notified" and self.cfg.epoch_notices:
                late_env["CHAOS_NOTICE_SECRET_FILE"] = str(self.notice_secret_file)
            self.late_recipient_urls[role] = self._gunicorn(
                role.replace("_", "-"), "bench.chaos.recipient:application", late_env, threads=2
            )

    def start_worker(self) -> None:
        cmd = [
            PY, "-m", "celery", "-A", "leaseboard", "worker", "-B", "-P", "solo",
            "--without-mingle", "--without-gossip", "-l", "WARNING",
            "-s", str(self.tmp / "beat-schedule"),
        ]  # fmt: skip
        self.spawn(
            "worker", cmd, self.env(DATABASE_URL=self.db_url + "?application_name=chaos-worker")
        )

    def stop_worker(self) -> None:
        proc = self.procs.get("worker")
        if proc is not None:
            stop_group(proc)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                signal_group(proc, signal.SIGTERM)
        deadline = time.time() + 10
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                signal_group(proc, signal.SIGKILL)
                proc.wait(5)


# --- PostgreSQL and Redis: restarts and the always-leave-them-running guarantee ------------


def _pg_ctl(action: str) -> None:
    version = sorted(os.listdir("/etc/postgresql"))[-1]
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", action],
        check=False,
        timeout=60,
        capture_output=True,
    )


def pg_up() -> bool:
    import psycopg

    try:
        with psycopg.connect(f"{PG}/postgres", connect_timeout=2) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


def pg_restart() -> None:
    _pg_ctl("restart")
    wait_until(pg_up, "PostgreSQL", interval=0.2)


REDIS_START = [
    "redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", "6379",
    "--save", "", "--appendonly", "no",
]  # fmt: skip


def redis_up() -> bool:
    return (
        subprocess.run(
            ["redis-cli", "ping"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
        == "PONG"
    )


def redis_restart() -> None:
    subprocess.run(["redis-cli", "shutdown", "nosave"], capture_output=True, timeout=10)
    deadline = time.time() + 5
    while time.time() < deadline and redis_up():
        time.sleep(0.1)
    subprocess.run(REDIS_START, capture_output=True, timeout=10)
    wait_until(redis_up, "Redis", interval=0.2)


def ensure_services() -> None:
    """Leave PostgreSQL and Redis running, whatever happened."""
    try:
        if not pg_up():
            say("PostgreSQL is down: starting it")
            _pg_ctl("start")
            wait_until(pg_up, "PostgreSQL", interval=0.2)
    except Exception as exc:
        say(f"could not start PostgreSQL: {exc}")
    try:
        if not redis_up():
            say("Redis is down: starting it")
            subprocess.run(REDIS_START, capture_output=True, timeout=10)
            wait_until(redis_up, "Redis", interval=0.2)
    except Exception as exc:
        say(f"could not start Redis: {exc}")
