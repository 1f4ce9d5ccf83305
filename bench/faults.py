"""`make faults`: Leaseboard's own parts fail under load (docs/design.md §14), in about three
minutes, on a PostgreSQL and a Redis of its own (bench/servers.py; never the machine's
shared servers), with gunicorn (2 workers × 4 threads), a Celery worker with beat, an SDK
fleet in threads and a recipient webhook that takes epoch notices and alert deliveries
(bench/faults_fleet.py).

Faults, in order, with the fleet running: PostgreSQL stopped (`pg_ctl stop -m fast`),
PostgreSQL frozen (SIGSTOP of every process of it) past the statement timeout, Redis
killed with `kill -9` while the worker holds unacknowledged messages, the worker killed.
Reports responses by status and media type, commit-then-error (an error answered for a
write that is in the database), grants and effects acknowledged against the database,
the outboxes at the end, the sweep's resumption after Redis returns and the time until
/healthz says `stale` once the worker is dead. Exits 1 when a check fails.

    .venv/bin/python bench/faults.py [--agents 12] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import PY, ROOT, django_env, migrate, sayer, signal_group, spawn, start_gunicorn
from bench.common import stop_group as stop
from bench.faults_fleet import Hook, Record, agent
from bench.servers import OwnPostgres, OwnRedis

say = sayer("faults")
PASSWORD = "faults-operator-password-1"
BOUNDS_FROM_THE_SUITE = (  # tests/pg_env.py's generous values must not leak in here
    "LEASEBOARD_DB_STATEMENT_TIMEOUT_MS",
    "LEASEBOARD_DB_LOCK_TIMEOUT_MS",
    "LEASEBOARD_API_DEADLINE_MS",
    "LEASEBOARD_PAGE_DEADLINE_MS",
)
SETUP = """
import json, django
django.setup()
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from leaseboard.core.models import Queue
from leaseboard.core.services.executors import agent_create
from leaseboard.core.services.recipients import recipient_create, recipient_webhook_set
from leaseboard.policy.services.people import ROLE_NAMES as ROLES
q, _ = Queue.objects.get_or_create(name="default")
q.notify = {"webhooks": [{"url": %(hook)r + "/alerts", "secret": "faults-alert-secret-123"}]}
q.save()
for role in ROLES:
    Group.objects.get_or_create(name=role)
user = get_user_model().objects.create_user(username="ops", password=%(password)r)
user.groups.add(Group.objects.get(name="operator"))
recipient_create(name="ledger")
recipient_webhook_set(name="ledger", url=%(hook)r + "/epochs")
tokens = [
    agent_create(name=f"fleet-{i}", queues=["default"], actor_name="faults")[1]
    for i in range(%(agents)d)
]
print(json.dumps(tokens))
"""


class Run:
    def __init__(self, agents: int, keep: bool = False, keep_alive_s: int = 2) -> None:
        self.keep = keep
        self.keep_alive_s = keep_alive_s
        self.tmp = Path(tempfile.mkdtemp(prefix="lb-faults-run-"))
        self.pg = OwnPostgres()
        self.redis = OwnRedis()
        self.hook = Hook()
        self.agents = agents
        self.record = Record()
        self.stop_fleet = threading.Event()
        self.threads: list[threading.Thread] = []
        self.worker: subprocess.Popen | None = None
        self.web: Any = None
        self.figures: dict[str, Any] = {}
        self.worker_exits = 0

    # -- the processes ------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        env = django_env(
            self.db_url,
            drop=("LEASEBOARD_TESTING", "REDIS_URL", *BOUNDS_FROM_THE_SUITE),
            LEASEBOARD_DATA_DIR=str(self.tmp / "data"),
            CELERY_BROKER_URL=self.redis.url(0),
            LEASEBOARD_CELERY_QUEUE="lb-faults",
            DB_CONN_MAX_AGE="60",
            LOG_LEVEL="WARNING",
            # The harness's recipient webhook listens on loopback.
            LEASEBOARD_WEBHOOK_ALLOW_NETWORKS="127.0.0.0/8,::1/128",
        )
        return env

    def start(self) -> None:
        self.pg.start()
        self.redis.start()
        self.db_url = self.pg.create_database("lb")
        say(f"own PostgreSQL on :{self.pg.port}, own Redis on :{self.redis.port}; migrating")
        migrate(self.env())
        script = SETUP % {"hook": self.hook.url, "password": PASSWORD, "agents": self.agents}
        out = subprocess.run(
            [PY, "-c", script], cwd=ROOT, env=self.env(), capture_output=True, text=True, check=True
        )
        self.tokens = json.loads(out.stdout.strip().splitlines()[-1])
        self.web = start_gunicorn(
            "leaseboard.wsgi:application", env=self.env(), workers=2, worker_class="gthread",
            threads=4, extra=("--timeout", "60", "--keep-alive", str(self.keep_alive_s)),
            log=self.tmp / "web.log", what="faults web",
        )  # fmt: skip
        self.start_worker()
        self.wait("a first sweep", lambda: self.last_sweep() is not None, 60)

    def start_worker(self) -> None:
        cmd = [
            PY, "-m", "celery", "-A", "leaseboard", "worker", "-B", "-P", "solo",
            "--without-mingle", "--without-gossip", "-l", "INFO",
            "-s", str(self.tmp / "beat-schedule"),
        ]  # fmt: skip
        self.worker = spawn(cmd, env=self.env(), log=self.tmp / "worker.log")

    def close(self) -> None:
        self.stop_fleet.set()
        for t in self.threads:
            t.join(10)
        if self.worker is not None:
            stop(self.worker)
        if self.web is not None:
            self.web.stop()
        self.hook.close()
        self.redis.close()
        self.pg.close()
        if self.keep:
            say(f"logs kept in {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- reading the database and the node -----------------------------------------------------

    def sql(self, query: str, params: list[Any] | None = None) -> Any:
        import psycopg

        with psycopg.connect(self.db_url, autocommit=True, connect_timeout=5) as conn:
            return conn.execute(query, params or []).fetchone()

    def db_now_ms(self) -> int:
        return int(
            self.sql("SELECT (floor(extract(epoch from clock_timestamp())*1000))::bigint")[0]
        )

    def last_sweep(self) -> int | None:
        try:
            row = self.sql("SELECT last_completed_at_ms FROM sweeps_sweepstate WHERE id = 1")
        except Exception:  # the database is what is being failed
            return None
        return None if row is None else row[0]

    def healthz(self) -> dict[str, Any]:
        import httpx

        answer = httpx.get(f"{self.web.url}/healthz", timeout=5)
        return {"status": answer.status_code, **answer.json()}

    def wait(self, what: str, ready: Any, timeout: float) -> float:
        started = time.monotonic()
        while not ready():
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"{what}: not within {timeout:.0f} s")
            self.watch_worker()
            time.sleep(0.1)
        return time.monotonic() - started

    def watch_worker(self) -> None:
        if self.worker is not None and self.worker.poll() is not None:
            self.worker_exits += 1
            say(f"the worker exited by itself (code {self.worker.returncode}); restarting it")
            self.start_worker()

    def pause(self, seconds: float) -> None:
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            self.watch_worker()
            time.sleep(0.2)

    # -- the run -------------------------------------------------------------------------------

    def fleet(self) -> None:
        for i, token in enumerate(self.tokens):
            t = threading.Thread(
                target=agent, args=(i, self.web.url, token, self.record, self.stop_fleet),
                name=f"agent-{i}", daemon=True,
            )  # fmt: skip
            t.start()
            self.threads.append(t)

    def phase(self, name: str) -> None:
        self.record.phase = name

    def faults(self) -> None:
        self.pause(15)
        say("PostgreSQL stopped for 12 s")
        self.phase("postgres stopped 12 s")
        self.pg.stop()
        self.pause(12)
        self.pg.start()
        self.phase("steady")
        self.pause(15)
        say("PostgreSQL frozen (SIGSTOP) for 10 s: past the 1.5 s statement timeout")
        self.phase("postgres frozen 10 s")
        self.pg.freeze()
        self.pause(10)
        self.pg.thaw()
        self.phase("steady")
        self.pause(15)
        self.redis_restart()
        self.pause(15)
        self.worker_killed()
        self.phase("steady")
        self.pause(15)

    def redis_restart(self) -> None:
        # Messages the worker holds unacknowledged when Redis dies (a countdown retry used
        # to make them): six tasks due in ten minutes, reserved at once.
        subprocess.run(
            [PY, "-c", "import django\ndjango.setup()\nfrom leaseboard.sweeps.tasks import "
             "deliver_email\nfor _ in range(6): deliver_email.apply_async((0,), countdown=600)"],
            cwd=ROOT, env=self.env(), check=True, capture_output=True,
        )  # fmt: skip
        self.wait("6 unacked", lambda: self.redis.redis_cli("HLEN", "unacked") == "6", 30)
        say("Redis killed (-9) holding 6 unacknowledged messages, back in 6 s")
        self.phase("redis killed 6 s")
        self.redis.kill9()
        self.pause(6)
        self.redis.start()
        self.phase("steady")
        back = self.db_now_ms()
        took = self.wait("a sweep after Redis", lambda: (self.last_sweep() or 0) > back, 120)
        self.figures["sweep_resumed_after_redis_s"] = round(took, 1)
        say(f"sweeps resumed {took:.1f} s after Redis returned")

    def worker_killed(self) -> None:
        import httpx

        assert self.worker is not None
        self.phase("worker dead")
        signal_group(self.worker, signal.SIGKILL)
        self.worker.wait(10)
        self.worker = None
        say("worker killed (-9)")
        took = self.wait("/healthz stale", lambda: self.healthz()["checks"]["sweeps"]["stale"], 60)
        health = self.healthz()
        browser = httpx.Client(base_url=self.web.url, timeout=10, follow_redirects=True)
        login = browser.get("/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text)
        page = browser.post(
            "/login/",
            data={"username": "ops", "password": PASSWORD, "csrfmiddlewaretoken": csrf.group(1)},
            headers={"Referer": f"{self.web.url}/login/"},
        )  # fmt: skip
        banner = "leases are not being ended or alerted" in page.text
        self.figures.update(
            stale_after_worker_died_s=round(took, 1),
            stale_threshold_s=health["checks"]["sweeps"]["stale_after_s"],
            healthz_status_while_stale=health["status"],
            banner_shown=banner,
        )
        say(f"/healthz said stale {took:.1f} s after the kill (HTTP {health['status']}); "
            f"banner {'shown' if banner else 'MISSING'}")  # fmt: skip
        self.start_worker()
        back = self.db_now_ms()
        resumed = self.wait(
            "a sweep after the restart", lambda: (self.last_sweep() or 0) > back, 60
        )
        self.figures["sweep_resumed_after_worker_restart_s"] = round(resumed, 1)

    def drain(self) -> None:
        self.stop_fleet.set()
        for t in self.threads:
            t.join(60)

        # What the run owed: every outbox empty, every abandoned lease expired.
        def settled() -> bool:
            pending = self.sql(
                "SELECT (SELECT count(*) FROM core_epochnotice WHERE status = 'pending') + "
                "(SELECT count(*) FROM sweeps_notificationdelivery WHERE status = 'pending')"
            )[0]
            overdue = self.sql(
                "SELECT count(*) FROM core_lease WHERE state IN ('active', 'jeopardy') "
                "AND expires_at_ms < %s",
                [self.db_now_ms() - 3000],
            )[0]
            return pending == 0 and overdue == 0

        self.figures["settled_after_load_s"] = round(
            self.wait("the outboxes drained", settled, 90), 1
        )


# Where a write the client was told failed would be, had it committed anyway.
WRITTEN = {
    "admit": "SELECT count(*) FROM core_workitem WHERE key = %s",
    "acquire": "SELECT count(*) FROM core_lease l JOIN core_workitem w "
    "ON w.id = l.work_item_id WHERE w.key = %s",
    "effect": "SELECT count(*) FROM core_effect WHERE idempotency_key = %s",
    "release": "SELECT count(*) FROM core_lease WHERE id = %s AND state = 'released'",
    "outcome": "SELECT count(*) FROM core_effect WHERE id = %s AND outcome = 'applied'",
}


def checks(run: Run) -> dict[str, Any]:
    r = run.record

    def count(query: str, *params: Any) -> int:
        return int(run.sql(query, list(params))[0])

    writes = dict.fromkeys(WRITTEN, 0)
    committed: list[tuple[str, str, str]] = []
    for step, key, code in r.failed:
        writes[step] += 1
        if count(WRITTEN[step], key):
            committed.append((step, key, code))
    grants_in_db = count("SELECT count(*) FROM core_lease WHERE id = ANY(%s::uuid[])", r.grants)
    effects_in_db = count("SELECT count(*) FROM core_effect WHERE id = ANY(%s::uuid[])", r.effects)
    delivered_notices = count("SELECT count(*) FROM core_epochnotice WHERE status = 'delivered'")
    deliveries = count(
        "SELECT count(*) FROM sweeps_notificationdelivery WHERE status = 'delivered'"
    )
    html = sum(n for what, n in r.statuses.items() if "html" in what)
    errors_500 = sum(n for what, n in r.statuses.items() if what.startswith("500"))
    by_code = {}
    for step, _, code in r.failed:
        by_code[f"{step} {code}"] = by_code.get(f"{step} {code}", 0) + 1
    unknown = [c for c in committed if c[2].endswith("timeout") or "commit_unknown" in c[2]]
    result = {
        "responses": dict(sorted(r.statuses.items())),
        "failed_writes": writes,
        "failed_by_code": dict(sorted(by_code.items())),
        "commit_then_error": len(committed) - len(unknown),
        "unknown_outcome_then_committed": len(unknown),
        "committed_examples": committed[:10],
        "grants_acknowledged": len(r.grants),
        "grants_in_db": grants_in_db,
        "effects_acknowledged": len(r.effects),
        "effects_in_db": effects_in_db,
        "holdings_in_local_jeopardy": r.jeopardy_entered,
        "holdings_resumed_from_jeopardy": r.jeopardy_resumed,
        "holdings_lost_to_the_outages": dict(r.lost_to_outage),
        "epoch_notices_delivered": delivered_notices,
        "epoch_notices_received": len(run.hook.notices),
        "alert_deliveries_delivered": deliveries,
        "alert_deliveries_received": len(run.hook.deliveries),
        "worker_exits_by_itself": run.worker_exits,
        "slowest_answer_s": round(r.slowest_s, 2),
        "unavailable_answer_s": _spread(r.unavailable_s),
        "responses_by_phase": {k: dict(sorted(v.items())) for k, v in r.by_phase.items()},
        **run.figures,
    }
    result["checks"] = {
        "no_html": html == 0,
        "no_500": errors_500 == 0,
        "no_commit_then_error": result["commit_then_error"] == 0,
        "no_grant_lost": grants_in_db == len(r.grants),
        "no_effect_lost": effects_in_db == len(r.effects),
        "every_notice_received": len(run.hook.notices) >= delivered_notices > 0,
        "every_alert_delivery_received": len(run.hook.deliveries) >= deliveries > 0,
        "worker_survived_redis": run.worker_exits == 0,
    }
    if "stale_after_worker_died_s" in run.figures:  # not in a calm run
        result["checks"].update(
            stale_within_threshold_plus_5_s=run.figures["stale_after_worker_died_s"]
            <= run.figures["stale_threshold_s"] + 5,
            banner_shown=bool(run.figures["banner_shown"]),
            healthz_200_while_stale=run.figures["healthz_status_while_stale"] == 200,
        )
    return result


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    return {"n": len(ordered), "p50": at(0.5), "p99": at(0.99), "max": round(ordered[-1], 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=12)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the logs' folder")
    parser.add_argument(
        "--keep-alive-s", type=int, default=2, help="gunicorn's --keep-alive (its default: 2)"
    )
    parser.add_argument(
        "--calm-s", type=float, default=0, help="no faults: run the fleet this long (a baseline)"
    )
    args = parser.parse_args()
    run = Run(args.agents, keep=args.keep, keep_alive_s=args.keep_alive_s)
    started = time.monotonic()
    try:
        run.start()
        say(f"{args.agents} agents; load average {os.getloadavg()[0]:.1f}")
        run.fleet()
        if args.calm_s:
            run.pause(args.calm_s)
        else:
            run.faults()
        run.drain()
        result = checks(run)
    finally:
        run.close()
    result["run_s"] = round(time.monotonic() - started)
    result["load_average_at_end"] = round(os.getloadavg()[0], 1)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    failed = [name for name, ok in result["checks"].items() if not ok]
    say("all checks passed" if not failed else f"FAILED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
