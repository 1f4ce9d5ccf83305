"""`make chaos`: fencing under faults, with real processes, on loopback, bounded in time.

Starts its own PostgreSQL database, two gunicorn web servers, a Celery worker with embedded
beat on its own Redis db and queue, a recipient (bench/chaos_recipient.py, own database,
ledger row and guard `check_in` in one transaction) and N SDK agents in a few processes.
Agents loop acquire → checkpoint → effects (server proposal, then the recipient with
X-Lease-Epoch / X-Fencing-Token) → release. Faults: pauses longer than the ttl followed by
an effect anyway, threads abandoning leases, agent processes SIGKILLed, the Celery worker
SIGKILLed (aimed at an open sweep transaction) and restarted, PostgreSQL and Redis restarts
(unless --no-restarts), takeovers approved mid-flight and handed back (or left to lapse).

Then `check()` proves, and prints counts for: (1) no effect accepted below the recipient's
high-water mark; (2) no two holders with live standing on one work item at once; (3) every
attempted effect is in the recipient's ledger; (4) every expired lease alerted exactly once.
Exit status 1 if any check fails. `--json PATH` writes the results (tests/test_chaos.py).

Attempt accounting (check 3): an agent logs an intent line before each recipient call and a
result line after. Connect failures are "not attempted". An answer from the recipient
(201 accepted, 409/403 refused) is "definite" and must have a ledger row with that status.
Timeouts, dropped connections, 5xx (the recipient's database restarting mid-request) and
intents of SIGKILLed agents are "indeterminate": the request may or may not have committed,
so they are counted (with and without a ledger row) but cannot fail the check.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PY = sys.executable
PG = "postgres://postgres@127.0.0.1:5432"


def say(msg: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Config:
    duration_s: float = 90.0
    agents: int = 50
    restarts: bool = True
    procs: int = 0  # agent processes; 0 = about 10 agents per process
    items: int = 0  # work items; 0 = agents // 2
    ttl_ms: int = 5000
    db: str = "leaseboard_chaos"
    redis_db: int = 13
    seed: int = 0
    takeovers: int = 0  # 0 = about one per 8 s
    worker_kills: int = 0  # 0 = 2 (1 when shorter than 40 s)
    proc_kills: int = 0  # 0 = about one per 15 s
    p_pause: float = 0.06
    p_abandon: float = 0.05
    json_out: str = ""

    def __post_init__(self) -> None:
        self.procs = self.procs or max(1, min(self.agents, (self.agents + 9) // 10))
        self.items = self.items or max(4, self.agents // 2)
        self.takeovers = self.takeovers or max(1, int(self.duration_s / 8))
        self.worker_kills = self.worker_kills or (2 if self.duration_s >= 40 else 1)
        self.proc_kills = self.proc_kills or max(1, int(self.duration_s / 15))
        self.seed = self.seed or random.SystemRandom().randrange(1, 10**6)

    @property
    def recipient_db(self) -> str:
        return self.db + "_recipient"

    @property
    def timing(self) -> dict[str, int]:
        renew = self.ttl_ms * 3 // 10
        return {
            "ttl_ms": self.ttl_ms,
            "renew_after_ms": renew,
            "jeopardy_after_ms": self.ttl_ms * 7 // 10,
            # Above the takeover standing: see the report on takeover approval vs queue timing.
            "max_lifetime_ms": 120_000,
        }


# --- agents (separate processes; the SDK only, no Django) ---------------------------------


class AgentLog:
    def __init__(self, path: str) -> None:
        self._f = open(path, "a", buffering=1)  # line-buffered: a SIGKILL loses no whole line
        self._lock = threading.Lock()

    def __call__(self, **rec: Any) -> None:
        rec["t"] = time.time()
        with self._lock:
            self._f.write(json.dumps(rec) + "\n")


def agent_process(cfg_path: str) -> int:
    import httpx

    from leaseboard.client import (
        Client,
        ClientTiming,
        LeaseError,
        LocalJeopardy,
        LockDelay,
        TransientError,
        WorkLeased,
    )

    cfg = json.loads(Path(cfg_path).read_text())
    emit = AgentLog(cfg["log"])
    stop_at = time.monotonic() + cfg["run_s"]
    stop_file = Path(cfg["stop_file"])
    ttl_s = cfg["ttl_ms"] / 1000
    renew_s = cfg["ttl_ms"] * 3 / 10 / 1000
    timing = ClientTiming(
        request_timeout_s=renew_s / 2, renew_interval_s=renew_s, safety_margin_s=renew_s / 2
    )

    def stopping() -> bool:
        return time.monotonic() >= stop_at or stop_file.exists()

    def run(agent: dict[str, Any]) -> None:
        name = agent["name"]
        rng = random.Random(f"{cfg['seed']}-{name}-{os.getpid()}")
        client = Client(agent["url"], agent["token"], timing=timing)
        rhttp = httpx.Client(base_url=cfg["recipient_url"], timeout=2.0)

        def send(headers: dict[str, str], key: str, epoch: int, idem: str, kind: str) -> str:
            attempt = uuid.uuid4().hex
            emit(ev="attempt", attempt=attempt, agent=name, key=key, epoch=epoch, kind=kind)
            body = {"attempt": attempt, "idem": idem, "agent": name, "kind": kind}
            try:
                r = rhttp.post("/effect", json=body, headers=headers)
            except (httpx.ConnectError, httpx.ConnectTimeout):
                emit(ev="result", attempt=attempt, result="connect_failed")
                return "connect_failed"
            except httpx.HTTPError as exc:
                emit(ev="result", attempt=attempt, result="indeterminate", err=type(exc).__name__)
                return "indeterminate"
            data = r.json() if r.content else {}
            if r.status_code == 201:
                result = "accepted"
            elif r.status_code in (403, 409):
                result = "refused"
            else:
                result = "indeterminate"
            emit(
                ev="result",
                attempt=attempt,
                result=result,
                status=r.status_code,
                code=data.get("code"),
                ledger_id=data.get("ledger_id"),
            )
            return result

        def zombie(holding: Any) -> None:
            """Stop renewing, sleep past the ttl, then try an effect anyway."""
            client.renewer.unregister(holding)
            pause = ttl_s * rng.uniform(1.3, 1.8)
            emit(ev="pause", agent=name, key=holding.work_key, epoch=holding.epoch, s=pause)
            time.sleep(pause)
            idem = f"{name}-z-{uuid.uuid4().hex[:12]}"
            try:
                holding.effect("chaos.pay", holding.work_key, idempotency_key=idem)
                emit(ev="zombie_sdk", result="allowed", key=holding.work_key)
            except LocalJeopardy:
                emit(ev="zombie_sdk", result="refused", key=holding.work_key)
            except LeaseError as exc:
                emit(ev="zombie_sdk", result="refused", code=exc.code, key=holding.work_key)
            token = holding.fencing_token
            for _ in range(3):  # the server's answer, bypassing the SDK's local deadline
                try:
                    dec = client.propose_effect(
                        holding.lease_id,
                        holding.epoch,
                        "chaos.pay",
                        holding.work_key,
                        idempotency_key=idem,
                    )
                    emit(ev="zombie_server", result=dec.decision, key=holding.work_key)
                    token = dec.fencing_token or token
                    break
                except TransientError:
                    time.sleep(0.3)
                except LeaseError as exc:
                    emit(ev="zombie_server", result="refused", code=exc.code, key=holding.work_key)
                    break
            else:
                emit(ev="zombie_server", result="unreachable", key=holding.work_key)
            headers = {"X-Lease-Epoch": str(holding.epoch), "X-Work-Key": holding.work_key}
            if token:
                headers["X-Fencing-Token"] = token
            result = send(headers, holding.work_key, holding.epoch, idem, "zombie")
            emit(ev="zombie_recipient", result=result, key=holding.work_key)
            try:
                client.release(holding.lease_id, holding.epoch)
            except LeaseError:
                pass

        n = 0
        while not stopping():
            key = rng.choice(cfg["keys"])
            try:
                holding = client.hold(key)
            except (WorkLeased, LockDelay):
                time.sleep(rng.uniform(0.05, 0.3))
                continue
            except LeaseError as exc:
                emit(ev="acquire_error", agent=name, code=exc.code)
                time.sleep(rng.uniform(0.2, 0.5))
                continue
            emit(ev="grant", agent=name, key=key, epoch=holding.epoch, lease=holding.lease_id)
            fault = rng.random()
            try:
                n += 1
                holding.checkpoint({"agent": name, "n": n})
                effects = rng.randint(1, 3)
                for j in range(effects):
                    if fault < cfg["p_pause"] and j == effects - 1:
                        zombie(holding)
                        break
                    idem = f"{name}-{uuid.uuid4().hex[:16]}"
                    dec = holding.effect("chaos.pay", key, idempotency_key=idem)
                    if not dec.authorized:
                        continue
                    result = send(holding.headers(dec), key, holding.epoch, idem, "normal")
                    outcome = {"accepted": "applied", "refused": "failed"}.get(result, "unknown")
                    try:
                        holding.report_outcome(dec.effect_id, outcome)
                    except LeaseError:
                        pass
                    time.sleep(rng.uniform(0.05, 0.5))
                else:
                    if fault < cfg["p_pause"] + cfg["p_abandon"]:
                        client.renewer.unregister(holding)  # the thread walks away
                        emit(ev="abandon", agent=name, key=key, epoch=holding.epoch)
                        continue
                    holding.release()
                    emit(ev="release", agent=name, key=key, epoch=holding.epoch)
            except LeaseError as exc:
                emit(ev="lost", agent=name, key=key, epoch=holding.epoch, code=exc.code)
                client.renewer.unregister(holding)
                try:
                    holding.release()
                except LeaseError:
                    pass
            except Exception as exc:  # keep the agent alive; the log says what happened
                emit(ev="agent_error", agent=name, err=repr(exc)[:300])
                client.renewer.unregister(holding)
                time.sleep(0.2)
        client.close()
        rhttp.close()

    threads = [threading.Thread(target=run, args=(a,), daemon=True) for a in cfg["agents"]]
    for t in threads:
        t.start()
    for t in threads:
        t.join(cfg["run_s"] + 30)
    return 0


# --- the orchestrator ------------------------------------------------------------------------


@dataclass
class Faults:
    pauses: int = 0
    abandoned: int = 0
    agent_procs_killed: int = 0
    worker_kills: int = 0
    worker_kills_mid_sweep: int = 0
    pg_restarts: int = 0
    redis_restarts: int = 0
    takeovers_approved: int = 0
    takeovers_conflict: int = 0
    handbacks: int = 0
    standing_lapses_planned: int = 0
    zombie_sdk_refused: int = 0
    zombie_server_refused: int = 0
    zombie_server_authorized: int = 0
    zombie_recipient_refused: int = 0
    zombie_recipient_accepted: int = 0


class Chaos:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.tmp = Path(tempfile.mkdtemp(prefix="leaseboard-chaos-"))
        self.db_url = f"{PG}/{cfg.db}"
        self.recipient_url_db = f"{PG}/{cfg.recipient_db}"
        self.redis_url = f"redis://127.0.0.1:6379/{cfg.redis_db}"
        self.queue = f"lb-chaos-{uuid.uuid4().hex[:8]}"
        self.procs: dict[str, subprocess.Popen] = {}
        self.agent_procs: list[dict[str, Any]] = []
        self.faults = Faults()
        self.rng = random.Random(cfg.seed)
        self.stop_file = self.tmp / "stop"
        self.logs: list[Path] = []
        self.open_interventions: list[Any] = []
        self._iv_lock = threading.Lock()

    # -- environment --------------------------------------------------------------------------

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        for name in ("LEASEBOARD_TESTING", "REDIS_URL"):
            env.pop(name, None)
        env.update(
            DATABASE_URL=self.db_url,
            DJANGO_SETTINGS_MODULE="leaseboard.settings",
            DEBUG="false",
            PYTHONPATH=str(ROOT),
            LEASEBOARD_DATA_DIR=str(self.tmp / "data"),
            CELERY_BROKER_URL=self.redis_url,
            LEASEBOARD_CELERY_QUEUE=self.queue,
            LEASEBOARD_SWEEP_INTERVAL_S="0.5",
            LEASEBOARD_TAKEOVER_MIN_STANDING_MS="2000",
            LEASEBOARD_RATE_LIMIT_ENABLED="false",  # the harness's floods are the point
            LOG_LEVEL="ERROR",
            CHAOS_RECIPIENT_DB=self.recipient_url_db,
        )
        env.update(extra)
        return env

    def create_databases(self) -> None:
        import psycopg

        with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
            for name in (self.cfg.db, self.cfg.recipient_db):
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                conn.execute(f'CREATE DATABASE "{name}"')
        subprocess.run(
            [PY, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=ROOT,
            env=self.env(),
            check=True,
        )
        from bench.chaos_recipient import SCHEMA

        with psycopg.connect(self.recipient_url_db, autocommit=True) as conn:
            for stmt in SCHEMA:
                conn.execute(stmt)

    def setup_django(self) -> None:
        os.environ.update(self.env())
        import django

        django.setup()

    def seed(self) -> list[dict[str, Any]]:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group

        from leaseboard.core.models import Queue
        from leaseboard.core.services.executors import agent_create
        from leaseboard.core.services.fencing import fencing_public_keys
        from leaseboard.core.services.work import work_admit
        from leaseboard.web.roles import ROLES

        # Unknown outcomes (killed agents) must not park items for a human: this run is
        # about fencing, and reconciliation has its own tests.
        Queue.objects.create(
            name="chaos", timing=self.cfg.timing, agent_acquire_needs_reconciliation=False
        )
        self.keys = [f"chaos-{i}" for i in range(self.cfg.items)]
        for key in self.keys:
            work_admit(key=key, queue_name="chaos")
        fencing_public_keys()  # create the signing key once, before two servers race for it
        for name in ROLES:
            Group.objects.get_or_create(name=name)
        users = get_user_model().objects
        self.operator = users.create_user(username="chaos-operator", password="x" * 20)
        self.operator.groups.add(Group.objects.get(name="operator"))
        self.approver = users.create_user(username="chaos-approver", password="x" * 20)
        self.approver.groups.add(Group.objects.get(name="approver"))
        agents = []
        for i in range(self.cfg.agents):
            _, token = agent_create(name=f"chaos-agent-{i}")
            agents.append({"name": f"chaos-agent-{i}", "token": token})
        return agents

    # -- processes ----------------------------------------------------------------------------

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
        log = open(self.tmp / f"{name}.log", "ab")
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs[name] = proc
        return proc

    def _wait_port(self, port: int, what: str, timeout: float = 30) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), 0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{what} did not start; see {self.tmp}")

    def start_web(self) -> None:
        self.web_urls = []
        for i in range(2):
            port = free_port()
            cmd = [
                PY, "-m", "gunicorn", "leaseboard.wsgi:application", "--workers", "2",
                "--worker-class", "gthread", "--threads", "4", "--bind", f"127.0.0.1:{port}",
                "--log-level", "warning", "--timeout", "30",
            ]  # fmt: skip
            self._spawn(f"web{i}", cmd, self.env())
            self.web_urls.append(f"http://127.0.0.1:{port}")
            self._wait_port(port, f"web{i}")
        port = free_port()
        cmd = [
            PY, "-m", "gunicorn", "bench.chaos_recipient:application", "--workers", "2",
            "--worker-class", "gthread", "--threads", "8", "--bind", f"127.0.0.1:{port}",
            "--log-level", "warning",
        ]  # fmt: skip
        env = self.env(CHAOS_JWKS_URL=f"{self.web_urls[0]}/api/v1/fencing/keys")
        self._spawn("recipient", cmd, env)
        self.recipient_url = f"http://127.0.0.1:{port}"
        self._wait_port(port, "recipient")

    def start_worker(self) -> None:
        cmd = [
            PY, "-m", "celery", "-A", "leaseboard", "worker", "-B", "-P", "solo",
            "--without-mingle", "--without-gossip", "-l", "WARNING",
            "-s", str(self.tmp / "beat-schedule"),
        ]  # fmt: skip
        self._spawn(
            "worker", cmd, self.env(DATABASE_URL=self.db_url + "?application_name=chaos-worker")
        )

    def start_agent_proc(self, idx: int, agents: list[dict[str, Any]], run_s: float) -> None:
        log = self.tmp / f"agents-{idx}-{len(self.logs)}.jsonl"
        self.logs.append(log)
        cfg = {
            "agents": agents,
            "keys": self.keys,
            "recipient_url": self.recipient_url,
            "log": str(log),
            "run_s": run_s,
            "stop_file": str(self.stop_file),
            "ttl_ms": self.cfg.ttl_ms,
            "seed": self.cfg.seed,
            "p_pause": self.cfg.p_pause,
            "p_abandon": self.cfg.p_abandon,
        }
        path = log.with_suffix(".json")
        path.write_text(json.dumps(cfg))
        cmd = [PY, str(ROOT / "bench" / "chaos.py"), "_agent", str(path)]
        proc = self._spawn(f"agents-{idx}", cmd, self.env())
        self.agent_procs.append({"idx": idx, "agents": agents, "proc": proc})

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.time() + 10
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(5)

    # -- faults -------------------------------------------------------------------------------

    def kill_agent_proc(self, run_until: float) -> None:
        live = [a for a in self.agent_procs if a["proc"].poll() is None]
        if not live:
            return
        victim = self.rng.choice(live)
        os.killpg(victim["proc"].pid, signal.SIGKILL)
        victim["proc"].wait(5)
        self.agent_procs.remove(victim)
        self.faults.agent_procs_killed += 1
        say(f"SIGKILLed agent process {victim['idx']} ({len(victim['agents'])} agents)")
        time.sleep(0.5)
        self.start_agent_proc(victim["idx"], victim["agents"], max(1.0, run_until - time.time()))

    def kill_worker(self) -> None:
        """SIGKILL the worker, preferably while a sweep transaction is open, then restart."""
        import psycopg

        mid = False
        deadline = time.time() + 4
        try:
            with psycopg.connect(self.db_url, autocommit=True) as conn:
                while time.time() < deadline and not mid:
                    # The worker's connection (application_name) inside a transaction: a
                    # sweep is running (it does nothing else) a few ms before the kill.
                    row = conn.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND "
                        "application_name = 'chaos-worker' AND "
                        "state IN ('active', 'idle in transaction')",
                        (self.cfg.db,),
                    ).fetchone()
                    mid = bool(row and row[0])
                    if not mid:
                        time.sleep(0.002)
        except psycopg.Error:
            pass
        proc = self.procs["worker"]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
        self.faults.worker_kills += 1
        self.faults.worker_kills_mid_sweep += int(mid)
        say(f"SIGKILLed the Celery worker ({'mid-sweep' if mid else 'between sweeps'})")
        time.sleep(self.rng.uniform(0.5, 1.5))
        self.start_worker()

    def restart_postgres(self) -> None:
        say("restarting PostgreSQL")
        pg_restart()
        self.faults.pg_restarts += 1

    def restart_redis(self) -> None:
        say("restarting Redis")
        redis_restart()
        self.faults.redis_restarts += 1

    def takeover(self, lapse: bool) -> None:
        from django.db import close_old_connections, connection

        from leaseboard.core.models import Lease
        from leaseboard.domain.errors import LeaseboardError
        from leaseboard.takeovers.services import (
            takeover_approve,
            takeover_reject,
            takeover_request,
        )

        connection.close()  # a fresh connection per takeover (PostgreSQL may have restarted)
        try:
            lease = (
                Lease.objects.filter(
                    state__in=["active", "jeopardy"],
                    holder__kind="agent",
                    work_item__key__startswith="chaos-",
                )
                .select_related("work_item")
                .order_by("?")
                .first()
            )
            if lease is None:
                return
            # A human lease is validated against the queue's timing (ttl >= 3 x renew_after).
            standing = self.cfg.timing["renew_after_ms"] * 3 + 1000 if lapse else 60_000
            req = takeover_request(
                work_key=lease.work_item.key,
                user=self.operator,
                role="operator",
                reason_category="stuck",
                reason_text="chaos: operator takes over mid-flight",
                standing_ms=standing,
                request_id=f"chaos-{uuid.uuid4().hex[:8]}",
            )
            time.sleep(self.rng.uniform(0.0, 0.3))  # the agent keeps working meanwhile
            try:
                iv = takeover_approve(request_pk=req.pk, user=self.approver, role="approver")
            except LeaseboardError:
                # Leave nothing pending: a waiting request blocks the next one on the item.
                takeover_reject(
                    request_pk=req.pk, user=self.approver, role="approver", note="chaos: refused"
                )
                raise
            self.faults.takeovers_approved += 1
            say(f"takeover of {lease.work_item.key} approved (epoch {iv.epoch})")
            if lapse:
                self.faults.standing_lapses_planned += 1
            else:
                with self._iv_lock:
                    self.open_interventions.append((time.time() + self.rng.uniform(1, 3), iv))
        except LeaseboardError as exc:
            self.faults.takeovers_conflict += 1
            say(f"takeover refused: {getattr(exc, 'code', '?')}: {exc}")
        except Exception as exc:  # the database may be restarting
            say(f"takeover failed: {type(exc).__name__}: {str(exc)[:120]}")
            connection.close()
        finally:
            close_old_connections()

    def hand_back_due(self, force: bool = False) -> None:
        from django.db import connection

        from leaseboard.domain.errors import LeaseboardError
        from leaseboard.takeovers.services import standing_hand_back

        with self._iv_lock:
            due = [x for x in self.open_interventions if force or x[0] <= time.time()]
        for item in due:
            _, iv = item
            try:
                standing_hand_back(
                    intervention_pk=iv.pk,
                    user=self.operator,
                    role="operator",
                    lease_id=iv.lease_id,
                    epoch=iv.epoch,
                    note="chaos: handed back",
                )
                self.faults.handbacks += 1
            except LeaseboardError as exc:
                say(f"hand-back refused: {getattr(exc, 'code', exc)}")
            except Exception as exc:
                say(f"hand-back failed, will retry: {type(exc).__name__}")
                connection.close()
                continue
            with self._iv_lock:
                self.open_interventions.remove(item)

    # -- the run ------------------------------------------------------------------------------

    def schedule(self, start: float) -> list[tuple[float, str]]:
        d = self.cfg.duration_s
        rng = self.rng
        plan: list[tuple[float, str]] = []
        for k in range(self.cfg.worker_kills):
            plan.append((d * (k + 1) / (self.cfg.worker_kills + 1.5), "worker"))
        for k in range(self.cfg.proc_kills):
            plan.append((d * (k + 0.7) / (self.cfg.proc_kills + 0.5), "agents"))
        for k in range(self.cfg.takeovers):
            kind = "lapse" if k % 3 == 2 else "takeover"
            plan.append((d * (k + 0.5) / (self.cfg.takeovers + 0.5) + rng.uniform(-1, 1), kind))
        if self.cfg.restarts:
            plan.append((d * 0.4, "postgres"))
            plan.append((d * 0.7, "redis"))
        return sorted((start + max(1.0, t), what) for t, what in plan)

    def run(self) -> dict[str, Any]:
        cfg = self.cfg
        say(
            f"seed {cfg.seed}: {cfg.agents} agents in {cfg.procs} processes, {cfg.items} work "
            f"items, ttl {cfg.ttl_ms} ms, {cfg.duration_s:.0f} s, restarts={cfg.restarts}; "
            f"logs in {self.tmp}"
        )
        self.create_databases()
        self.setup_django()
        agents = self.seed()
        self.start_web()
        self.start_worker()
        for i, a in enumerate(agents):
            a["url"] = self.web_urls[i % 2]
        start = time.time()
        run_until = start + cfg.duration_s
        per = (len(agents) + cfg.procs - 1) // cfg.procs
        for p in range(cfg.procs):
            self.start_agent_proc(p, agents[p * per : (p + 1) * per], cfg.duration_s)
        plan = self.schedule(start)
        say(f"started; {len(plan)} scheduled faults")
        lapse_threads: list[threading.Thread] = []
        while time.time() < run_until:
            self.hand_back_due()
            while plan and plan[0][0] <= time.time():
                _, what = plan.pop(0)
                if what == "worker":
                    self.kill_worker()
                elif what == "agents":
                    self.kill_agent_proc(run_until)
                elif what == "postgres":
                    self.restart_postgres()
                elif what == "redis":
                    self.restart_redis()
                elif what in ("takeover", "lapse"):
                    t = threading.Thread(target=self.takeover, args=(what == "lapse",))
                    t.start()
                    lapse_threads.append(t)
            time.sleep(0.1)
        say("duration reached; stopping agents")
        self.stop_file.touch()
        for t in lapse_threads:
            t.join(30)
        for a in self.agent_procs:
            try:
                a["proc"].wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(a["proc"].pid, signal.SIGKILL)
        self.hand_back_due(force=True)
        self.settle()
        return self.finish()

    def settle(self) -> None:
        """Wait for every lease to end or pass its expiry, then sweep once more ourselves."""
        from django.db import connection

        from leaseboard.core.clock import db_now_ms
        from leaseboard.core.models import Lease
        from leaseboard.sweeps.services import sweep_run

        connection.close()  # PostgreSQL may have restarted under this connection
        deadline = time.time() + 3 * self.cfg.ttl_ms / 1000 + 20
        while time.time() < deadline:
            try:
                now = db_now_ms()
                pending = Lease.objects.filter(
                    state__in=["active", "jeopardy"], expires_at_ms__gt=now - 200
                ).count()
                if not pending:
                    break
            except Exception:
                connection.close()
            time.sleep(0.5)
        # Stop the worker first, so the final sweep is ours and nothing runs after it.
        proc = self.procs.get("worker")
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        for _ in range(3):
            report = sweep_run()
            if not report.more:
                break
        say(f"final sweep: {report.expired} expired, {report.jeopardy} to jeopardy")

    def agent_records(self) -> list[dict[str, Any]]:
        records = []
        for path in self.logs:
            if not path.exists():
                continue
            for line in path.read_text().splitlines():
                try:
                    records.append(json.loads(line))
                except ValueError:
                    pass  # a line cut by SIGKILL
        return records

    def finish(self) -> dict[str, Any]:
        records = self.agent_records()
        f = self.faults
        for r in records:
            ev = r.get("ev")
            if ev == "pause":
                f.pauses += 1
            elif ev == "abandon":
                f.abandoned += 1
            elif ev == "zombie_sdk" and r["result"] == "refused":
                f.zombie_sdk_refused += 1
            elif ev == "zombie_server":
                if r["result"] == "refused":
                    f.zombie_server_refused += 1
                elif r["result"] == "authorized":
                    f.zombie_server_authorized += 1
            elif ev == "zombie_recipient":
                if r["result"] == "refused":
                    f.zombie_recipient_refused += 1
                elif r["result"] == "accepted":
                    f.zombie_recipient_accepted += 1
        results = check(self.db_url, self.recipient_url_db, records, self.keys)
        activity = Counter(r.get("ev") for r in records)
        out = {
            "config": asdict(self.cfg),
            "faults": asdict(f),
            "activity": {k: activity[k] for k in ("grant", "release", "attempt", "lost")},
            "checks": results,
            "ok": all(c["ok"] for c in results.values()),
            "logs": str(self.tmp),
        }
        print_report(out)
        return out


# --- the checker -----------------------------------------------------------------------------


def check(
    db_url: str, recipient_db_url: str, records: list[dict[str, Any]], keys: list[str]
) -> dict[str, dict[str, Any]]:
    """The four properties, each with its counts and `ok`. Reads the databases directly."""
    import psycopg

    with psycopg.connect(recipient_db_url) as rconn:
        ledger = rconn.execute(
            "SELECT id, attempt, work_key, epoch, high_water, status, code, kind "
            "FROM chaos_ledger ORDER BY id"
        ).fetchall()
    with psycopg.connect(db_url) as conn:
        leases = conn.execute(
            "SELECT l.id::text, w.key, l.epoch, l.state, l.granted_at_ms, l.ended_at_ms, "
            "l.expires_at_ms, e.kind FROM core_lease l JOIN core_workitem w "
            "ON w.id = l.work_item_id JOIN core_executor e ON e.id = l.holder_id"
        ).fetchall()
        events = conn.execute(
            "SELECT lease_id::text, kind, min(id) FROM core_leaseevent "
            "WHERE kind IN ('granted', 'released', 'revoked', 'expired') GROUP BY lease_id, kind"
        ).fetchall()
        alerts = conn.execute(
            "SELECT lease_id::text, epoch, kind, dedupe_key FROM core_alert "
            "WHERE kind IN ('expired', 'standing_lapsed')"
        ).fetchall()
        now_ms = conn.execute(
            "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"
        ).fetchone()[0]
    return {
        "1_no_effect_below_high_water": check_high_water(ledger, leases),
        "2_one_live_holder": check_standing(leases, events),
        "3_attempts_in_ledger": check_ledger(ledger, records),
        "4_expiry_alerted_once": check_alerts(leases, alerts, now_ms),
    }


def check_high_water(ledger: list[tuple], leases: list[tuple]) -> dict[str, Any]:
    """Replay the accepted log per work item in commit (= id, see chaos_recipient) order."""
    mark: dict[str, int] = {}
    epochs = {(key, epoch) for _, key, epoch, *_ in leases}
    c: Counter = Counter()
    for _id, _attempt, key, epoch, high_water, status, code, _kind in ledger:
        if status == "accepted":
            c["accepted"] += 1
            if high_water != epoch:  # the guard reported a mark other than this epoch
                c["accepted_mark_mismatch"] += 1
            if key in mark and epoch < mark[key]:
                c["accepted_below_mark"] += 1
            if epoch > mark.get(key, -1):
                if key in mark:
                    c["mark_raised"] += 1
                mark[key] = epoch
            if (key, epoch) not in epochs:
                c["accepted_unknown_epoch"] += 1
        else:
            c["refused"] += 1
            if code == "stale_epoch":
                c["refused_stale_epoch"] += 1
                if epoch is not None and key in mark and epoch >= mark[key]:
                    c["stale_refusal_not_below_mark"] += 1
            else:
                c[f"refused_{code}"] += 1
    c["work_items"] = len(mark)
    ok = (
        c["accepted_below_mark"] == 0
        and c["accepted_unknown_epoch"] == 0
        and c["accepted_mark_mismatch"] == 0
        and c["accepted"] > 0
    )
    return {"ok": ok, **dict(c)}


def check_standing(leases: list[tuple], events: list[tuple] | None = None) -> dict[str, Any]:
    """Consecutive epochs of one work item never overlap in standing.

    Proof by commit order: the predecessor's end event (expired, released or revoked) must
    precede the successor's grant event. Event ids come from one sequence, taken inside
    each writing transaction while it holds the lease's lock, so their order is the order
    of the writes. The recorded times must agree: [granted_at_ms, end), with end =
    expires_at_ms for an expired lease and ended_at_ms otherwise, never overlap
    (`overlaps_recorded_times`). (That check found lease times taken from now(), the
    transaction's start, before a wait for the row lock; the clock is now read after.)
    """
    event_id = {(lease_id, kind): eid for lease_id, kind, eid in (events or [])}
    by_item: dict[str, list[tuple]] = defaultdict(list)
    for row in leases:
        by_item[row[1]].append(row)
    c: Counter = Counter()
    examples = []
    max_skew = 0
    for key, rows in by_item.items():
        rows.sort(key=lambda r: r[2])  # by epoch
        for r in rows:
            c["leases"] += 1
            c[f"state_{r[3]}"] += 1
            c[f"holder_{r[7]}"] += 1
        for a, b in zip(rows, rows[1:], strict=False):
            c["pairs_checked"] += 1
            a_id, _, a_epoch, a_state, a_granted, a_ended, a_expires, _ = a
            b_id, _, b_epoch, _, b_granted, *_ = b
            if b_granted < a_granted:
                c["epoch_order_differs_from_grant_order"] += 1
            if a_state in ("expired", "released", "revoked"):
                c[f"pairs_after_{a_state}"] += 1
                ended = event_id.get((a_id, a_state))
                granted = event_id.get((b_id, "granted"))
                if ended is None or granted is None:
                    c["events_missing"] += 1
                elif granted < ended:
                    c["granted_before_predecessor_ended"] += 1
                    if len(examples) < 5:
                        examples.append(f"{key}: epoch {b_epoch} granted before {a_epoch} ended")
                end_ms = a_expires if a_state == "expired" else a_ended
                if end_ms is not None and b_granted < end_ms:
                    c["overlaps_recorded_times"] += 1
                    max_skew = max(max_skew, end_ms - b_granted)
            else:
                c["successor_of_live_lease"] += 1
    if max_skew:
        c["overlaps_recorded_times_max_ms"] = max_skew
    bad = (
        "granted_before_predecessor_ended",
        "successor_of_live_lease",
        "events_missing",
        "epoch_order_differs_from_grant_order",
        "overlaps_recorded_times",
    )
    ok = all(c[k] == 0 for k in bad) and c["leases"] > 0
    return {"ok": ok, **dict(c), "examples": examples}


def check_ledger(ledger: list[tuple], records: list[dict[str, Any]]) -> dict[str, Any]:
    rows = {attempt: status for _id, attempt, _k, _e, _h, status, *_ in ledger}
    results = {r["attempt"]: r for r in records if r.get("ev") == "result"}
    c: Counter = Counter()
    missing = []
    attempts = [r for r in records if r.get("ev") == "attempt"]
    for a in attempts:
        res = results.get(a["attempt"])
        kind = res["result"] if res else "no_result"  # no result: the agent was SIGKILLed
        row = rows.get(a["attempt"])
        if kind == "connect_failed":
            c["not_attempted_connect_failed"] += 1
            if row is not None:
                c["connect_failed_but_in_ledger"] += 1
        elif kind in ("accepted", "refused"):
            c["definite"] += 1
            if row is None:
                c["definite_missing"] += 1
                if len(missing) < 5:
                    missing.append(a["attempt"])
            elif row != kind:
                c["definite_status_mismatch"] += 1
            else:
                c[f"definite_{kind}"] += 1
        else:
            c["indeterminate"] += 1
            c["indeterminate_in_ledger" if row is not None else "indeterminate_not_in_ledger"] += 1
    known = {a["attempt"] for a in attempts}
    c["ledger_rows"] = len(rows)
    c["ledger_rows_without_agent_record"] = sum(1 for k in rows if k not in known)
    ok = (
        c["definite_missing"] == 0
        and c["definite_status_mismatch"] == 0
        and c["connect_failed_but_in_ledger"] == 0
        and c["ledger_rows_without_agent_record"] == 0
        and c["definite"] > 0
    )
    return {"ok": ok, **dict(c), "missing_examples": missing}


def check_alerts(leases: list[tuple], alerts: list[tuple], now_ms: int) -> dict[str, Any]:
    per_lease: dict[str, list[tuple]] = defaultdict(list)
    for lease_id, epoch, kind, dedupe in alerts:
        per_lease[lease_id].append((epoch, kind, dedupe))
    c: Counter = Counter()
    examples = []
    lease_ids = set()
    for lease_id, _key, epoch, state, _g, _e, expires_at_ms, holder_kind in leases:
        lease_ids.add(lease_id)
        mine = per_lease.get(lease_id, [])
        if state == "expired":
            c["expired_leases"] += 1
            want = "standing_lapsed" if holder_kind == "human" else "expired"
            good = [a for a in mine if a[2] == f"{want}:{lease_id}:{epoch}" and a[0] == epoch]
            if len(mine) == 1 and len(good) == 1:
                c[f"alerted_once_{want}"] += 1
            elif not mine:
                c["expired_without_alert"] += 1
                if len(examples) < 5:
                    examples.append(f"lease {lease_id} expired without an alert")
            else:
                c["expired_alerted_wrongly"] += 1
                if len(examples) < 5:
                    examples.append(f"lease {lease_id}: alerts {mine}")
        else:
            if mine:
                c[f"expiry_alert_on_{state}_lease"] += 1
                if len(examples) < 5:
                    examples.append(f"lease {lease_id} is {state} but has {mine}")
            if state in ("active", "jeopardy") and expires_at_ms < now_ms:
                c["live_past_expiry_after_final_sweep"] += 1
    c["alerts_without_lease"] = sum(1 for k in per_lease if k not in lease_ids)
    bad = (
        "expired_without_alert",
        "expired_alerted_wrongly",
        "live_past_expiry_after_final_sweep",
        "alerts_without_lease",
    )
    ok = all(c[k] == 0 for k in bad) and not any(k.startswith("expiry_alert_on_") for k in c)
    return {"ok": ok and c["expired_leases"] > 0, **dict(c), "examples": examples}


def print_report(out: dict[str, Any]) -> None:
    print("\n=== chaos: faults injected ===")
    for k, v in out["faults"].items():
        print(f"  {k:32} {v}")
    print("=== chaos: activity (agent logs) ===")
    for k, v in out["activity"].items():
        print(f"  {k:32} {v}")
    print("=== chaos: checks ===")
    for name, res in out["checks"].items():
        print(f"  [{'PASS' if res['ok'] else 'FAIL'}] {name}")
        for k, v in res.items():
            if k != "ok" and v not in ([], None):
                print(f"        {k:40} {v}")
    print(f"=== chaos: {'ALL CHECKS PASS' if out['ok'] else 'SOME CHECKS FAILED'} ===", flush=True)


# --- services: restarts and the always-leave-them-running guarantee --------------------------


def _pg_version() -> str:
    return sorted(os.listdir("/etc/postgresql"))[-1]


def _pg_ctl(action: str) -> None:
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", _pg_version(), "main", action],
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
    _wait(pg_up, "PostgreSQL")


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
    _wait(redis_up, "Redis")


def _wait(up: Any, what: str, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while not up():
        if time.time() > deadline:
            raise RuntimeError(f"{what} is not back after {timeout:.0f} s")
        time.sleep(0.2)


def ensure_services() -> None:
    """Leave PostgreSQL and Redis running, whatever happened."""
    try:
        if not pg_up():
            say("PostgreSQL is down: starting it")
            _pg_ctl("start")
            _wait(pg_up, "PostgreSQL")
    except Exception as exc:
        say(f"could not start PostgreSQL: {exc}")
    try:
        if not redis_up():
            say("Redis is down: starting it")
            subprocess.run(REDIS_START, capture_output=True, timeout=10)
            _wait(redis_up, "Redis")
    except Exception as exc:
        say(f"could not start Redis: {exc}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_agent"]:
        return agent_process(argv[1])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=90.0, help="seconds of load (90)")
    parser.add_argument("--agents", type=int, default=50, help="number of agents (50)")
    parser.add_argument("--no-restarts", action="store_true", help="no PostgreSQL/Redis restarts")
    parser.add_argument("--ttl-ms", type=int, default=5000)
    parser.add_argument("--db", default="leaseboard_chaos")
    parser.add_argument("--redis-db", type=int, default=13)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default="", help="write the results here")
    args = parser.parse_args(argv)
    cfg = Config(
        duration_s=args.duration,
        agents=args.agents,
        restarts=not args.no_restarts,
        ttl_ms=args.ttl_ms,
        db=args.db,
        redis_db=args.redis_db,
        seed=args.seed,
        json_out=args.json,
    )
    chaos = Chaos(cfg)
    out: dict[str, Any] = {"ok": False}
    try:
        out = chaos.run()
    except Exception:
        traceback.print_exc()
        out = {"ok": False, "error": traceback.format_exc(), "faults": asdict(chaos.faults)}
    finally:
        try:
            chaos.stop_all()
        finally:
            ensure_services()
    if cfg.json_out:
        Path(cfg.json_out).write_text(json.dumps(out, indent=2, default=str))
    return 0 if out.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
