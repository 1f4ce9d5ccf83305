"""The faults a chaos run injects while the agents work, and their counts: agent processes
and the Celery worker SIGKILLed (the worker aimed at an open sweep transaction) and
restarted, PostgreSQL and Redis restarted, takeovers approved mid-flight and handed back
(or left to lapse). The agents' own faults (pauses, abandoned leases) are counted from
their logs."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bench.chaos import say
from bench.chaos.services import pg_restart, redis_restart

if TYPE_CHECKING:
    from bench.chaos.agents import Fleet
    from bench.chaos.orchestrator import Config
    from bench.chaos.services import Services


@dataclass
class Faults:
    pauses: int = 0
    stalls: int = 0
    abandoned: int = 0
    agent_procs_killed: int = 0
    worker_kills: int = 0
    worker_kills_mid_sweep: int = 0
    pg_restarts: int = 0
    redis_restarts: int = 0
    takeovers_approved: int = 0
    takeovers_of_jeopardy: int = 0  # an operator answering a jeopardy alert
    takeovers_conflict: int = 0
    handbacks: int = 0
    standing_lapses_planned: int = 0
    zombie_sdk_refused: int = 0
    zombie_server_refused: int = 0
    zombie_server_authorized: int = 0
    zombie_recipient_refused: int = 0
    zombie_recipient_accepted: int = 0

    def count_agent_records(self, records: list[dict[str, Any]]) -> None:
        """Add the faults the agents injected themselves, as their logs tell them."""
        for r in records:
            ev = r.get("ev")
            if ev == "pause":
                self.pauses += 1
            elif ev == "stall":
                self.stalls += 1
            elif ev == "abandon":
                self.abandoned += 1
            elif ev == "zombie_sdk" and r["result"] == "refused":
                self.zombie_sdk_refused += 1
            elif ev == "zombie_server":
                if r["result"] == "refused":
                    self.zombie_server_refused += 1
                elif r["result"] == "authorized":
                    self.zombie_server_authorized += 1
            elif ev == "zombie_recipient":
                if r["result"] == "refused":
                    self.zombie_recipient_refused += 1
                elif r["result"] == "accepted":
                    self.zombie_recipient_accepted += 1


class Injector:
    """The orchestrator's fault actions. Takeovers run in threads of their own, hence the
    lock on the interventions waiting to be handed back."""

    def __init__(
        self,
        *,
        cfg: Config,
        services: Services,
        fleet: Fleet,
        rng: random.Random,
        faults: Faults,
        operator: Any,
        approver: Any,
    ) -> None:
        self.cfg = cfg
        self.services = services
        self.fleet = fleet
        self.rng = rng
        self.faults = faults
        self.operator = operator
        self.approver = approver
        self.open_interventions: list[Any] = []
        self._iv_lock = threading.Lock()

    def kill_agent_proc(self, run_until: float) -> None:
        victim = self.fleet.kill_one(self.rng)
        if victim is None:
            return
        self.faults.agent_procs_killed += 1
        say(f"SIGKILLed agent process {victim['idx']} ({len(victim['agents'])} agents)")
        time.sleep(0.5)
        self.fleet.start(victim["idx"], victim["agents"], max(1.0, run_until - time.time()))

    def kill_worker(self) -> None:
        """SIGKILL the worker, preferably while a sweep transaction is open, then restart."""
        import psycopg

        mid = False
        deadline = time.time() + 4
        try:
            with psycopg.connect(self.services.db_url, autocommit=True) as conn:
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
        proc = self.services.procs["worker"]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
        self.faults.worker_kills += 1
        self.faults.worker_kills_mid_sweep += int(mid)
        say(f"SIGKILLed the Celery worker ({'mid-sweep' if mid else 'between sweeps'})")
        time.sleep(self.rng.uniform(0.5, 1.5))
        self.services.start_worker()

    def restart_postgres(self) -> None:
        say("restarting PostgreSQL")
        pg_restart()
        self.faults.pg_restarts += 1

    def restart_redis(self) -> None:
        say("restarting Redis")
        redis_restart()
        self.faults.redis_restarts += 1

    def takeover(self, lapse: bool, jeopardy: bool = False) -> None:
        """Take over a random live agent lease; with `jeopardy`, one whose holder missed
        its renewals (the operator answering a jeopardy alert), or nothing."""
        from django.db import close_old_connections, connection

        from leaseboard.core.authority import Actor
        from leaseboard.core.clock import db_now_ms
        from leaseboard.core.models import Lease
        from leaseboard.domain.errors import LeaseboardError
        from leaseboard.takeovers.services import (
            takeover_approve,
            takeover_reject,
            takeover_request,
        )

        connection.close()  # a fresh connection per takeover (PostgreSQL may have restarted)
        try:
            live = Lease.objects.filter(
                state__in=["active", "jeopardy"],
                holder__kind="agent",
                work_item__key__startswith="chaos-",
            )
            if jeopardy:
                now = db_now_ms()
                live = live.filter(jeopardy_at_ms__lte=now, expires_at_ms__gt=now + 300)
            lease = live.select_related("work_item").order_by("?").first()
            if lease is None:
                return
            # A human lease is validated against the queue's timing (ttl >= 3 x renew_after).
            standing = self.cfg.timing["renew_after_ms"] * 3 + 1000 if lapse else 60_000
            req = takeover_request(
                work_key=lease.work_item.key,
                actor=Actor.human(self.operator),
                reason_category="stuck",
                reason_text="chaos: operator takes over mid-flight",
                standing_ms=standing,
                request_id=f"chaos-{uuid.uuid4().hex[:8]}",
            )
            time.sleep(self.rng.uniform(0.0, 0.3))  # the agent keeps working meanwhile
            try:
                iv = takeover_approve(request_pk=req.pk, actor=Actor.human(self.approver))
            except LeaseboardError:
                # Leave nothing pending: a waiting request blocks the next one on the item.
                takeover_reject(
                    request_pk=req.pk, actor=Actor.human(self.approver), note="chaos: refused"
                )
                raise
            self.faults.takeovers_approved += 1
            self.faults.takeovers_of_jeopardy += int(jeopardy)
            say(
                f"takeover of {lease.work_item.key} approved (epoch {iv.epoch}"
                f"{', in jeopardy' if jeopardy else ''})"
            )
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

        from leaseboard.core.authority import Actor
        from leaseboard.domain.errors import LeaseboardError
        from leaseboard.takeovers.services import standing_hand_back

        with self._iv_lock:
            due = [x for x in self.open_interventions if force or x[0] <= time.time()]
        for item in due:
            _, iv = item
            try:
                standing_hand_back(
                    intervention_pk=iv.pk,
                    actor=Actor.human(self.operator),
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
