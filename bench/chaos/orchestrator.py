"""A chaos run from start to finish: configuration, seeding, the fault schedule, the main
loop, settling (every lease ended or past its expiry, then a final sweep of our own) and
the report. Processes are in services.py, agents in agents.py, faults in faults.py and the
four checks in checks.py."""

from __future__ import annotations

import random
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.chaos import say
from bench.chaos.agents import Fleet
from bench.chaos.checks import check, print_report
from bench.chaos.faults import Faults, Injector
from bench.chaos.late import check_late_sends, notice_figures
from bench.chaos.services import Services
from bench.common import setup_django


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
    p_stall: float = 0.04  # stop renewing past jeopardy, short of the ttl
    jeopardy_takeover_s: float = 0.0  # an operator takes over a lease in jeopardy this
    # often; 0 = 75 s / agents (1.5 s for 50 agents), so small runs are not all takeovers
    epoch_notices: bool = True  # the late_notified recipient registers for epoch notices
    json_out: str = ""

    def __post_init__(self) -> None:
        self.procs = self.procs or max(1, min(self.agents, (self.agents + 9) // 10))
        self.items = self.items or max(4, self.agents // 2)
        self.takeovers = self.takeovers or max(1, int(self.duration_s / 8))
        self.worker_kills = self.worker_kills or (2 if self.duration_s >= 40 else 1)
        self.proc_kills = self.proc_kills or max(1, int(self.duration_s / 15))
        self.jeopardy_takeover_s = self.jeopardy_takeover_s or max(1.5, 75 / self.agents)
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


class Chaos:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.tmp = Path(tempfile.mkdtemp(prefix="leaseboard-chaos-"))
        self.services = Services(cfg, self.tmp)
        self.faults = Faults()
        self.rng = random.Random(cfg.seed)
        self.stop_file = self.tmp / "stop"
        self.keys: list[str] = []

    def seed(self) -> tuple[list[dict[str, Any]], Any, Any]:
        """The chaos queue and work items, an operator, an approver and the agents."""
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group

        from leaseboard.core.models import Queue
        from leaseboard.core.services.executors import agent_create
        from leaseboard.core.services.fencing import fencing_public_keys
        from leaseboard.core.services.work import work_admit
        from leaseboard.policy.services.people import ROLE_NAMES as ROLES

        # Unknown outcomes (killed agents) must not park items for a human: this run is
        # about fencing, and reconciliation has its own tests.
        Queue.objects.create(
            name="chaos", timing=self.cfg.timing, agent_acquire_needs_reconciliation=False
        )
        self.keys = [f"chaos-{i}" for i in range(self.cfg.items)]
        for key in self.keys:
            work_admit(key=key, queue_name="chaos", by=None)
        fencing_public_keys()  # create the signing key once, before two servers race for it
        for name in ROLES:
            Group.objects.get_or_create(name=name)
        users = get_user_model().objects
        operator = users.create_user(username="chaos-operator", password="x" * 20)
        operator.groups.add(Group.objects.get(name="operator"))
        approver = users.create_user(username="chaos-approver", password="x" * 20)
        approver.groups.add(Group.objects.get(name="approver"))
        agents = []
        for i in range(self.cfg.agents):
            _, token = agent_create(name=f"chaos-agent-{i}", queues=["chaos"], actor_name="chaos")
            agents.append({"name": f"chaos-agent-{i}", "token": token})
        return agents, operator, approver

    def first_faults(self) -> dict[str, float]:
        """The first grant of three agents draws a pause, an abandonment and a stall for
        sure (a value inside each fault's band): a short run on a loaded machine sees few
        grants, and every kind of fault must still happen at least once."""
        cfg = self.cfg
        bands = [
            cfg.p_pause / 2,
            cfg.p_pause + cfg.p_abandon / 2,
            cfg.p_pause + cfg.p_abandon + cfg.p_stall / 2,
        ]
        return {f"chaos-agent-{i}": value for i, value in enumerate(bands) if i < cfg.agents}

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
        if self.cfg.jeopardy_takeover_s:
            t = self.cfg.jeopardy_takeover_s
            while t < d - 2:
                plan.append((t + rng.uniform(-0.3, 0.3), "jeopardy"))
                t += self.cfg.jeopardy_takeover_s
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
        svc = self.services
        svc.create_databases()
        setup_django(**svc.env())
        agents, operator, approver = self.seed()
        svc.start_web()
        if cfg.epoch_notices:
            self.register_notices()
        svc.start_worker()
        for i, a in enumerate(agents):
            a["url"] = svc.web_urls[i % 2]
        fleet = Fleet(
            svc,
            {
                "keys": self.keys,
                "recipient_url": svc.recipient_url,
                "late_recipient_urls": svc.late_recipient_urls,
                "p_stall": cfg.p_stall,
                "stop_file": str(self.stop_file),
                "ttl_ms": cfg.ttl_ms,
                "seed": cfg.seed,
                "p_pause": cfg.p_pause,
                "p_abandon": cfg.p_abandon,
                "first_faults": self.first_faults(),
            },
        )
        faults = Injector(
            cfg=cfg,
            services=svc,
            fleet=fleet,
            rng=self.rng,
            faults=self.faults,
            operator=operator,
            approver=approver,
        )
        start = time.time()
        run_until = start + cfg.duration_s
        per = (len(agents) + cfg.procs - 1) // cfg.procs
        for p in range(cfg.procs):
            fleet.start(p, agents[p * per : (p + 1) * per], cfg.duration_s)
        plan = self.schedule(start)
        say(f"started; {len(plan)} scheduled faults")
        background = self.background_faults(start, run_until)
        lapse_threads: list[threading.Thread] = []
        while time.time() < run_until:
            faults.hand_back_due()
            while plan and plan[0][0] <= time.time():
                _, what = plan.pop(0)
                if what == "worker":
                    faults.kill_worker()
                elif what == "agents":
                    faults.kill_agent_proc(run_until)
                elif what == "postgres":
                    faults.restart_postgres()
                elif what == "redis":
                    faults.restart_redis()
                elif what == "jeopardy":
                    t = threading.Thread(target=faults.takeover, args=(False, True))
                    t.start()
                    lapse_threads.append(t)
                elif what in ("takeover", "lapse"):
                    t = threading.Thread(target=faults.takeover, args=(what == "lapse",))
                    t.start()
                    lapse_threads.append(t)
            time.sleep(0.1)
        if background is not None:
            background.join()
        say("duration reached; stopping agents")
        self.stop_file.touch()
        for t in lapse_threads:
            t.join(30)
        fleet.wait(15)
        faults.hand_back_due(force=True)
        self.settle()
        return self.finish(fleet.records())

    def background_faults(self, start: float, run_until: float) -> threading.Thread | None:
        """Faults on a schedule of their own, in a thread the run waits for before it stops
        the agents (bench/ha/chaos_run.py: the database cluster's); none here."""
        return None

    def register_notices(self) -> None:
        """The late_notified recipient registers for epoch-advance notices (a recipient of
        its own, `manage.py recipient_webhook set`); it reads the secret from a file."""
        from leaseboard.core.services.recipients import recipient_create, recipient_webhook_set

        url = f"{self.services.late_recipient_urls['late_notified']}/epochs"
        recipient_create(name="chaos-late-notified", actor_name="chaos")
        secret = recipient_webhook_set(name="chaos-late-notified", url=url, actor_name="chaos")
        path = self.services.notice_secret_file
        path.write_text(secret)
        path.chmod(0o600)
        say(f"late_notified recipient registered for epoch notices at {url}")

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
        self.services.stop_worker()
        for _ in range(3):
            report = sweep_run()
            if not report.more:
                break
        say(f"final sweep: {report.expired} expired, {report.jeopardy} to jeopardy")

    def finish(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        self.faults.count_agent_records(records)
        results = check(self.services.db_url, self.services.recipient_db_url, records, self.keys)
        results["5_late_sends_refused"] = check_late_sends(
            self.services.db_url, self.services.recipient_db_url, records
        )
        notices = notice_figures(self.services.db_url, self.services.recipient_db_url)
        activity = Counter(r.get("ev") for r in records)
        out = {
            "config": asdict(self.cfg),
            "faults": asdict(self.faults),
            "activity": {k: activity[k] for k in ("grant", "release", "attempt", "lost")},
            "checks": results,
            "epoch_notices": notices,
            "ok": all(c["ok"] for c in results.values()),
            "logs": str(self.tmp),
        }
        print_report(out)
        return out
