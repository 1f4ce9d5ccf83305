"""Leaseboard served by a real gunicorn against a PostgreSQL of the test's own (and, where a
test needs one, a Redis and a Celery worker of its own), so a test may stop, freeze or kill
them (bench/servers.py). The schema is copied from pytest-django's migrated test database.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.common import Server, django_env, spawn, start_gunicorn, stop_group
from bench.servers import OwnPostgres, OwnRedis

ROOT = Path(__file__).resolve().parents[2]

# What the stack's processes run with: the shipped defaults (tests/pg_env.py sets generous
# ones for the suite), stated here so the tests can assert against them.
BOUNDS = {
    "LEASEBOARD_DB_CONNECT_TIMEOUT_S": "2",
    "LEASEBOARD_DB_STATEMENT_TIMEOUT_MS": "1500",
    "LEASEBOARD_DB_LOCK_TIMEOUT_MS": "1000",
    "LEASEBOARD_API_DEADLINE_MS": "1800",
    "LEASEBOARD_PAGE_DEADLINE_MS": "10000",
    "LEASEBOARD_DB_RETRY_AFTER_S": "1",
}
PASSWORD = "correct-horse-battery-9"

SETUP = """
import json, django
django.setup()
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from leaseboard.core.models import Queue
from leaseboard.core.services.executors import agent_create
from leaseboard.policy.services.people import ROLE_NAMES as ROLES
Queue.objects.get_or_create(name="default")
for role in ROLES:
    Group.objects.get_or_create(name=role)
user = get_user_model().objects.create_user(username="ops", password=%(password)r)
user.groups.add(*Group.objects.filter(name__in=["operator", "approver", "manager"]))
_, token = agent_create(name="agent-1", queues=["default"], actor_name="faults")
print(json.dumps({"token": token}))
"""


def migrated_db_url() -> str:
    """pytest-django's test database (call with the database unblocked)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database()")
        name = cursor.fetchone()[0]
    s = connection.settings_dict
    host, port = s["HOST"] or "127.0.0.1", s["PORT"] or 5432
    return f"postgres://{s['USER'] or 'postgres'}@{host}:{port}/{name}"


@dataclass
class Stack:
    tmp: Path
    pg: OwnPostgres
    redis: OwnRedis | None = None
    db_url: str = ""
    token: str = ""
    web: Server | None = None
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)
    queue: str = field(default_factory=lambda: f"lb-faults-{uuid.uuid4().hex[:8]}")
    # Servers a test adds beside the stack (a replica, a standby): closed after it.
    after_close: list[Callable[[], None]] = field(default_factory=list)

    def env(self, **extra: str) -> dict[str, str]:
        broker = self.redis.url(0) if self.redis else "filesystem://"
        values = {
            "LEASEBOARD_DATA_DIR": str(self.tmp / "data"),
            "CELERY_BROKER_URL": broker,
            "LEASEBOARD_CELERY_QUEUE": self.queue,
            "DB_CONN_MAX_AGE": "60",
            "LOG_LEVEL": "WARNING",
            # The harness's recipient webhooks listen on loopback.
            "LEASEBOARD_WEBHOOK_ALLOW_NETWORKS": "127.0.0.0/8,::1/128",
            **BOUNDS,
            **self.extra_env,
            **extra,
        }
        env = django_env(self.db_url, drop=("LEASEBOARD_TESTING", "REDIS_URL"), **values)
        return env

    def setup(self, source_url: str) -> None:
        self.pg.start()
        self.db_url = self.pg.copy_schema(source_url, "lb_faults")
        out = subprocess.run(
            [sys.executable, "-c", SETUP % {"password": PASSWORD}],
            cwd=ROOT,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        self.token = json.loads(out.stdout.strip().splitlines()[-1])["token"]

    def start_web(self, threads: int = 4) -> str:
        self.web = start_gunicorn(
            "leaseboard.wsgi:application",
            env=self.env(),
            workers=1,
            worker_class="gthread",
            threads=threads,
            extra=("--timeout", "60"),
            log=self.tmp / "web.log",
            what="faults web",
        )
        return self.web.url

    def start_worker(self, name: str = "worker", **extra: str) -> subprocess.Popen:
        cmd = [
            sys.executable, "-m", "celery", "-A", "leaseboard", "worker", "-B", "-P", "solo",
            "--without-mingle", "--without-gossip", "-l", "INFO",
            "-s", str(self.tmp / f"{name}-beat-schedule"),
        ]  # fmt: skip
        proc = spawn(cmd, env=self.env(**extra), log=self.tmp / f"{name}.log")
        self.procs[name] = proc
        return proc

    def run_django(self, code: str, timeout: float = 120) -> str:
        """Run `code` in a process of the stack's own (Django set up); its stdout."""
        out = subprocess.run(
            [sys.executable, "-c", "import django\ndjango.setup()\n" + code],
            cwd=ROOT,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout

    def db(self, sql: str, params: list[Any] | None = None) -> Any:
        """One row of `sql` on the stack's database (autocommit)."""
        import psycopg

        with psycopg.connect(self.db_url, autocommit=True, connect_timeout=5) as conn:
            return conn.execute(sql, params or []).fetchone()

    def db_now_ms(self) -> int:
        return int(
            self.db("SELECT (floor(extract(epoch from clock_timestamp()) * 1000))::bigint")[0]
        )

    def last_sweep_completed_ms(self) -> int | None:
        row = self.db("SELECT last_completed_at_ms FROM sweeps_sweepstate WHERE id = 1")
        return None if row is None else row[0]

    def log(self, name: str, tail: int | None = 6000) -> str:
        path = self.tmp / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return text[-tail:] if tail else text

    def api(self, timeout: float = 15) -> httpx.Client:
        assert self.web is not None
        return httpx.Client(
            base_url=self.web.url,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=timeout,
        )

    def signed_in(self) -> tuple[httpx.Client, str]:
        """A browser-like client signed in as the operator, and its CSRF token."""
        assert self.web is not None
        client = httpx.Client(base_url=self.web.url, timeout=15, follow_redirects=True)
        page = client.get("/login/")
        csrf = _csrf(page.text)
        answer = client.post(
            "/login/",
            data={"username": "ops", "password": PASSWORD, "csrfmiddlewaretoken": csrf},
            headers={"Referer": f"{self.web.url}/login/"},
        )
        assert answer.status_code == 200 and "Sign out" in answer.text, answer.text[-2000:]
        return client, _csrf(answer.text) or client.cookies.get("csrftoken", "")

    def close(self) -> None:
        for proc in self.procs.values():
            stop_group(proc)
        if self.web is not None:
            self.web.stop()
        if self.redis is not None:
            self.redis.close()
        self.pg.close()
        for close in self.after_close:
            close()


def _csrf(html: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html) or re.search(
        r'"X-CSRFToken": "([^"]+)"', html
    )
    return found.group(1) if found else ""


def problem(response: httpx.Response) -> dict[str, Any]:
    assert response.headers.get("content-type", "").startswith("application/problem+json"), (
        response.status_code,
        response.headers.get("content-type"),
        response.text[:500],
    )
    body = response.json()
    assert isinstance(body, dict)
    return body


def own_servers_available() -> bool:
    from bench.servers import PG_BIN

    return (PG_BIN / "initdb").exists() and os.path.exists("/usr/bin/redis-server")


@contextmanager
def own_stack(
    django_db_blocker: Any,
    prefix: str,
    pg: Callable[[], OwnPostgres] = OwnPostgres,
    *,
    redis: bool = False,
    extra_env: dict[str, str] | None = None,
    web: bool = True,
) -> Iterator[Stack]:
    """A stack on a PostgreSQL of its own (`pg()`), and a Redis of its own if `redis`, in a
    fresh temporary folder named `prefix…`, its schema copied from pytest-django's migrated
    test database, gunicorn started unless `web=False`; closed and the folder removed on the
    way out. For a module-scoped fixture; skips where initdb or redis-server is missing."""
    if not own_servers_available():
        pytest.skip("needs PostgreSQL's initdb and redis-server to start servers of its own")
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    stack = Stack(tmp=tmp, pg=pg(), redis=OwnRedis() if redis else None)
    stack.extra_env = dict(extra_env or {})
    try:
        if stack.redis is not None:
            stack.redis.start()
        with django_db_blocker.unblock():
            source = migrated_db_url()
        stack.setup(source)
        if web:
            stack.start_web()
        yield stack
    finally:
        stack.close()
        shutil.rmtree(tmp, ignore_errors=True)
