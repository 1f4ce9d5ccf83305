"""`make ha-chaos`: the chaos fleet (bench/chaos: agents, recipients that never meet the
successor, takeovers, killed agent processes and workers) against the HA cluster
(bench/ha/cluster.py: etcd, two PostgreSQL nodes under Patroni, HAProxy) while the
cluster's primary fails, on a schedule of its own, each fault once the cluster is healthy
again: the primary's postmaster SIGKILLed (`--kills`, 3), the whole primary node frozen
(SIGSTOP of Patroni and PostgreSQL) past Patroni's TTL and thawed, and only the primary's
postmaster frozen for 10 s (Patroni does not notice).

Besides the chaos checks it measures, and ends with exactly one line:

    ha: failovers=F stale_accepted=S same_order_two_holders=D acknowledged_lost=L \
        max_write_outage_s=W   (one line)

F promotions (the primary's timeline rose by F); S effects a recipient accepted below a
fencing order, (generation, epoch), it had already accepted for that work item; D fencing
orders given to two different leases of one work item (agents' grants and tokens,
recipients' ledgers, the final primary's leases); L grants, effects and probe writes
answered 2xx that the final primary does not have; W the longest gap between two
acknowledged writes of a probe reaching the primary as the web nodes do (through HAProxy).
Exits 1 unless S, D and L are 0 and the frozen primary came back as a replica without
acknowledging a write as a second primary.

    .venv/bin/python -m bench.ha.chaos [--agents 20] [--kills 3] [--port-base 27500]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
from bench.chaos.orchestrator import Chaos, Config
from bench.chaos.recipient import LATE_ROLES, TABLES
from bench.chaos.services import Services
from bench.common import migrate, sayer, wait_until
from bench.faults_fleet import Record
from bench.faults_fleet import agent as sdk_agent
from bench.ha.cluster import Cluster
from bench.ha.nodes import TTL_S, Node
from bench.ha.probe import Probe, create_table
from bench.servers import OwnPostgres, OwnRedis

say = sayer("ha-chaos")
# tests/pg_env.py's generous bounds must not leak into the servers when a test runs this.
BOUNDS_FROM_THE_SUITE = (
    "LEASEBOARD_DB_STATEMENT_TIMEOUT_MS",
    "LEASEBOARD_DB_LOCK_TIMEOUT_MS",
    "LEASEBOARD_API_DEADLINE_MS",
    "LEASEBOARD_PAGE_DEADLINE_MS",
)


class HAServices(Services):
    """The chaos run's processes, on the cluster (through HAProxy), a recipient database of
    its own (another system: not on the cluster) and a Redis of its own."""

    def __init__(self, cfg: Config, tmp: Path, cluster: Cluster, rpg: OwnPostgres, redis: OwnRedis):
        super().__init__(cfg, tmp)
        self.cluster = cluster
        self.recipient_pg = rpg
        self.db_url = cluster.url(cfg.db)
        self.recipient_db_url = rpg.url(cfg.recipient_db)
        self.redis_url = redis.url(0)

    def env(self, **extra: str) -> dict[str, str]:
        env = super().env(**extra)
        for name in BOUNDS_FROM_THE_SUITE:
            env.pop(name, None)
        return env

    def create_databases(self) -> None:
        import psycopg

        from bench.chaos.recipient import SCHEMA

        self.cluster.create_database(self.cfg.db)
        self.recipient_pg.create_database(self.cfg.recipient_db)
        migrate(self.env())
        create_table(self.db_url)
        with psycopg.connect(self.recipient_db_url, autocommit=True) as conn:
            for stmt in SCHEMA:
                conn.execute(stmt)


@dataclass
class ClusterFaults:
    """What the cluster went through, and what was seen meanwhile."""

    plan: list[str] = field(default_factory=list)
    done: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    second_primary_acked_writes: int = 0
    old_primary_back_as_replica_s: float | None = None
    both_claimed_primary_samples: int = 0


class HAChaos(Chaos):
    def __init__(
        self, cfg: Config, plan: list[str], port_base: int | None, strict: bool, sdk_agents: int
    ) -> None:
        super().__init__(cfg)
        self.tmp.chmod(0o755)  # the cluster's folder is in it, and PostgreSQL runs as postgres
        # Its logs stay with the run's (the data goes).
        self.cluster = Cluster(self.tmp / "cluster", port_base=port_base, strict=strict, keep=True)
        self.recipient_pg = OwnPostgres()
        self.redis = OwnRedis()
        self.services: HAServices = HAServices(
            cfg, self.tmp, self.cluster, self.recipient_pg, self.redis
        )
        self.cluster_faults = ClusterFaults(plan=list(plan))
        # Beside the chaos agents: SDK agents of make faults (bench/faults_fleet.py) on the
        # default queue, a third holding for 30 s, recording every answer at the transport
        # and each fall into local jeopardy and recovery from it.
        self.sdk_agents = sdk_agents
        self.sdk_record = Record()
        self.sdk_stop = threading.Event()
        self.sdk_threads: list[threading.Thread] = []
        self.sdk_tokens: list[str] = []
        self.probe: Probe | None = None
        self.timeline_at_start: int | None = None

    # -- the servers --------------------------------------------------------------------------

    def start_servers(self) -> None:
        started = time.monotonic()
        self.recipient_pg.start()
        self.redis.start()
        self.cluster.start()
        self.timeline_at_start = self.cluster.timeline()
        say(
            f"cluster up in {time.monotonic() - started:.1f} s: "
            f"HAProxy :{self.cluster.primary_port}, "
            f"nodes {[n.pg_port for n in self.cluster.nodes]}, timeline {self.timeline_at_start}"
        )

    def stop_servers(self) -> None:
        for what in (self.services.stop_all, self.cluster.stop, self.redis.close,
                     self.recipient_pg.close):  # fmt: skip
            try:
                what()
            except Exception as exc:
                say(f"stopping: {type(exc).__name__}: {exc}")

    def seed(self) -> tuple[list[dict[str, Any]], Any, Any]:
        from leaseboard.core.models import Queue
        from leaseboard.core.services.executors import agent_create

        seeded = super().seed()
        Queue.objects.get_or_create(name="default")
        self.sdk_tokens = [
            agent_create(name=f"ha-sdk-{i}", queues=["default"], actor_name="ha-chaos")[1]
            for i in range(self.sdk_agents)
        ]
        return seeded

    # -- the cluster's faults -----------------------------------------------------------------

    def background_faults(self, start: float, run_until: float) -> threading.Thread:
        self.probe = Probe("haproxy", self.services.db_url).start()
        for i, token in enumerate(self.sdk_tokens):
            url = self.services.web_urls[i % len(self.services.web_urls)]
            t = threading.Thread(
                target=sdk_agent, args=(i, url, token, self.sdk_record, self.sdk_stop),
                name=f"sdk-agent-{i}", daemon=True,
            )  # fmt: skip
            t.start()
            self.sdk_threads.append(t)
        thread = threading.Thread(target=self._cluster_faults, args=(run_until,), daemon=True)
        thread.start()
        return thread

    def _cluster_faults(self, run_until: float) -> None:
        cf = self.cluster_faults
        time.sleep(8)
        for i, what in enumerate(cf.plan):
            need = {"kill": 15, "freeze_node": TTL_S + 25, "freeze_postmaster": 18}[what]
            if time.time() + need > run_until:
                cf.skipped.extend(cf.plan[i:])
                say(f"no time left for {cf.plan[i:]}")
                break
            try:
                wait_until(self.cluster.healthy, "a healthy cluster", 90, 0.25)
                time.sleep(3)
                getattr(self, f"_{what}")()
            except Exception as exc:
                cf.errors.append(f"{what}: {type(exc).__name__}: {exc}")
                say(f"{what} failed: {exc}")
        try:
            wait_until(self.cluster.healthy, "a healthy cluster at the end", 90, 0.25)
        except RuntimeError as exc:
            cf.errors.append(str(exc))
        finally:
            self.sdk_stop.set()
            for t in self.sdk_threads:
                t.join(45)

    def _primary(self) -> Node:
        """The primary, asked again for a while: a REST answer can be slow on a busy machine."""
        for _ in range(20):
            node = self.cluster.primary()
            if node is not None:
                return node
            time.sleep(0.5)
        raise RuntimeError("no primary")

    def _wait_new_primary(self, old: Node, timeout: float) -> float:
        at = time.monotonic()
        wait_until(
            lambda: (p := self.cluster.primary()) is not None and p is not old,
            "a new primary", timeout, 0.1,
        )  # fmt: skip
        return time.monotonic() - at

    def _kill(self) -> None:
        old = self._primary()
        at, wall = time.monotonic(), time.time()
        self.cluster.kill_postmaster(old)
        say(f"SIGKILL of the primary's postmaster ({old.name})")
        promoted = self._wait_new_primary(old, 60)
        wait_until(self.cluster.healthy, "the old primary back as a sync standby", 120, 0.25)
        self.cluster_faults.done.append(
            {"fault": "kill", "node": old.name, "at": at, "promoted_s": round(promoted, 1),
             "healthy_s": round(time.monotonic() - at, 1), "wall": wall, "wall_end": time.time()}
        )  # fmt: skip
        say(f"  new primary after {promoted:.1f} s; healthy after {time.monotonic() - at:.1f} s")

    def _freeze_node(self) -> None:
        """Past the TTL: the other node promotes; on SIGCONT the old one must demote itself
        (Patroni) and come back as a replica, never acknowledging a write as a primary."""
        old = self._primary()
        other = next(n for n in self.cluster.nodes if n is not old)
        freeze_s = TTL_S + 6
        at, wall = time.monotonic(), time.time()
        self.cluster.freeze_node(old)
        say(f"froze the whole primary node {old.name} (Patroni and PostgreSQL) for {freeze_s} s")
        watch = threading.Event()
        watcher = threading.Thread(target=self._watch_two_primaries, args=(watch,), daemon=True)
        watcher.start()
        try:
            promoted = self._wait_new_primary(old, freeze_s + 10)
            time.sleep(max(0.0, freeze_s - (time.monotonic() - at)))
        finally:
            # Aimed straight at the old primary (not through HAProxy): a write it
            # acknowledges while the other is primary would be a second primary's.
            direct = Probe("old-primary-direct", old.url(self.cfg.db)).start()
            thawed = time.monotonic()
            self.cluster.thaw_node(old)
        say(f"  {other.name} promoted after {promoted:.1f} s; thawed {old.name}")
        try:
            wait_until(
                lambda: self.cluster.writable(old) is False, "old primary a replica", 90, 0.2
            )
            self.cluster_faults.old_primary_back_as_replica_s = round(time.monotonic() - thawed, 1)
            time.sleep(2)
        finally:
            direct.close()
            watch.set()
            watcher.join(5)
        self.cluster_faults.second_primary_acked_writes += len(direct.acked)
        wait_until(self.cluster.healthy, "the old primary back as a sync standby", 120, 0.25)
        self.cluster_faults.done.append(
            {"fault": "freeze_node", "node": old.name, "at": at, "frozen_s": freeze_s,
             "promoted_s": round(promoted, 1),
             "old_primary_replica_after_thaw_s": self.cluster_faults.old_primary_back_as_replica_s,
             "old_primary_acked_writes": len(direct.acked),
             "healthy_s": round(time.monotonic() - at, 1), "wall": wall, "wall_end": time.time()}
        )  # fmt: skip
        say(
            f"  {old.name} a replica {self.cluster_faults.old_primary_back_as_replica_s} s after "
            f"the thaw; it acknowledged {len(direct.acked)} writes meanwhile"
        )

    def _watch_two_primaries(self, stop: threading.Event) -> None:
        while not stop.is_set():
            if all(self.cluster.writable(n, timeout=0.5) for n in self.cluster.nodes):
                self.cluster_faults.both_claimed_primary_samples += 1
            stop.wait(0.25)

    def _freeze_postmaster(self) -> None:
        """Only the postmaster: Patroni's own connection and every open backend go on, new
        connections wait. Patroni does not notice; nothing fails over."""
        node = self._primary()
        before = self.cluster.timeline()
        at, wall = time.monotonic(), time.time()
        # Writes on a new connection each, beside the run's probe on one kept open.
        fresh = Probe("fresh-connections", self.services.db_url, fresh=True).start()
        time.sleep(1)
        self.cluster.freeze_postmaster(node)
        say(f"froze only the postmaster of {node.name} for 10 s")
        try:
            time.sleep(10)
        finally:
            self.cluster.thaw_postmaster(node)
        time.sleep(3)
        fresh.close()
        self.cluster_faults.done.append(
            {"fault": "freeze_postmaster", "node": node.name, "at": at, "frozen_s": 10,
             "failed_over": self.cluster.timeline() != before,
             "still_primary": self.cluster.primary() is node,
             "new_connection_writes": {"acked": len(fresh.acked), "unknown": fresh.unknown,
                                       "failed": fresh.failed,
                                       "longest_gap_s": round(fresh.max_gap(), 2)},
             "wall": wall, "wall_end": time.time() + 5}
        )  # fmt: skip

    # -- the figures ----------------------------------------------------------------------------

    def finish(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        out = super().finish(records)
        if self.probe is not None:
            self.probe.close()
        out["ha"] = self.ha_figures(records)
        return out

    def ha_figures(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        import psycopg

        final = self.services.db_url
        with psycopg.connect(final, autocommit=True, connect_timeout=5) as conn:
            has_generation = bool(
                conn.execute(
                    "SELECT 1 FROM information_schema.columns WHERE table_name = 'core_lease' "
                    "AND column_name = 'generation'"
                ).fetchone()
            )
            generation = "l.generation" if has_generation else "0"
            leases = conn.execute(
                f"SELECT w.key, {generation}, l.epoch, l.id::text FROM core_lease l "
                "JOIN core_workitem w ON w.id = l.work_item_id"
            ).fetchall()
            effect_ids = {r[0] for r in conn.execute("SELECT id::text FROM core_effect")}
            # What the sweeps made of the outages (docs/design.md §14): alerts by kind and
            # cause, and the leases that went to jeopardy and came back by a renewal.
            alert_rows = conn.execute(
                "SELECT kind, coalesce(detail->>'cause', ''), count(*) FROM core_alert "
                "GROUP BY 1, 2 ORDER BY 1, 2"
            ).fetchall()
            recoveries = [
                r[0] for r in conn.execute(
                    "SELECT message FROM core_alert WHERE kind = 'recovery' ORDER BY id"
                )
            ]  # fmt: skip
            events = dict(
                conn.execute(
                    "SELECT kind, count(*) FROM core_leaseevent "
                    "WHERE kind IN ('jeopardy', 'recovered', 'expired') GROUP BY kind"
                ).fetchall()
            )
        holders: dict[tuple, set[str]] = defaultdict(set)
        for key, gen, epoch, lease in leases:
            holders[(key, gen or 0, epoch)].add(lease)
        lease_ids = {lease for *_, lease in leases}
        lost: Counter = Counter()
        lost_examples: list[str] = []
        sdk = self.sdk_record
        for lease in sdk.grants:
            if lease not in lease_ids:
                lost["sdk_grants"] += 1
                lost_examples.append(f"sdk grant {lease}")
        for effect in sdk.effects:
            if effect not in effect_ids:
                lost["sdk_effects"] += 1
                lost_examples.append(f"sdk effect {effect}")
        for r in records:
            ev = r.get("ev")
            if ev == "grant":
                if r.get("order"):
                    holders[(r["key"], *r["order"])].add(r["lease"])
                if r["lease"] not in lease_ids:
                    lost["grants"] += 1
                    lost_examples.append(f"grant {r['lease']}")
            elif ev == "effect":
                if r.get("order"):
                    holders[(r["key"], *r["order"])].add(r["lease"])
                if r["effect"] not in effect_ids:
                    lost["effects"] += 1
                    lost_examples.append(f"effect {r['effect']}")
        stale = 0
        stale_examples: list[str] = []
        with psycopg.connect(self.services.recipient_db_url, connect_timeout=5) as rconn:
            for role in ("main", *LATE_ROLES):
                mark: dict[str, tuple[int, int]] = {}
                for key, gen, epoch, lease in rconn.execute(
                    f"SELECT work_key, generation, epoch, lease_id FROM {TABLES[role][0]} "
                    "WHERE status = 'accepted' ORDER BY id"
                ):
                    order = (gen or 0, epoch)
                    holders[(key, *order)].add(lease)
                    if key in mark and order < mark[key]:
                        stale += 1
                        stale_examples.append(f"{role}: {key} {order} below {mark[key]}")
                    mark[key] = max(order, mark.get(key, order))
        two = {k: sorted(v) for k, v in holders.items() if len(v) > 1}
        probe_lost = self.probe.lost(final) if self.probe is not None else 0
        lost["probe_writes"] = probe_lost
        timeline = self.cluster.timeline()
        cf = self.cluster_faults
        for i, fault in enumerate(cf.done):
            until = cf.done[i + 1]["at"] if i + 1 < len(cf.done) else None
            gap = self.probe.gap_around(fault["at"], until) if self.probe is not None else None
            fault["write_outage_s"] = None if gap is None else round(gap, 2)
            # What the agents saw from the fault until it was over (healthy again, or 5 s
            # after a thaw): refused or failed acquisitions and holdings lost.
            start, end = fault.pop("wall"), fault.pop("wall_end")
            seen = Counter(
                r["ev"] for r in records
                if r.get("ev") in ("acquire_error", "lost", "grant") and start <= r["t"] <= end
            )  # fmt: skip
            fault["agents_meanwhile"] = dict(seen)
            fault["at"] = round(fault["at"], 1)
        failovers = (timeline or 0) - (self.timeline_at_start or 0)
        return {
            "failovers": failovers,
            "stale_accepted": stale,
            "same_order_two_holders": len(two),
            "acknowledged_lost": sum(lost.values()),
            "max_write_outage_s": round(self.probe.max_gap(), 2) if self.probe else None,
            "lost": dict(lost),
            "examples": {"stale": stale_examples[:5], "two_holders": list(two.items())[:5],
                         "lost": lost_examples[:5]},
            "acknowledged": {"grants": sum(1 for r in records if r.get("ev") == "grant"),
                             "effects": sum(1 for r in records if r.get("ev") == "effect"),
                             "probe_writes": len(self.probe.acked) if self.probe else 0},
            "probe": {"unknown": self.probe.unknown, "failed": self.probe.failed}
            if self.probe else {},
            "faults": cf.done,
            "skipped": cf.skipped,
            "errors": cf.errors,
            "second_primary_acked_writes": cf.second_primary_acked_writes,
            "both_claimed_primary_samples": cf.both_claimed_primary_samples,
            "old_primary_back_as_replica_s": cf.old_primary_back_as_replica_s,
            "sdk_fleet": {
                "agents": self.sdk_agents,
                "grants": len(sdk.grants),
                "effects": len(sdk.effects),
                "holdings_in_local_jeopardy": sdk.jeopardy_entered,
                "holdings_resumed_from_jeopardy": sdk.jeopardy_resumed,
                "holdings_lost": dict(sdk.lost_to_outage),
                "answers": dict(sorted(sdk.statuses.items())),
                "html_or_500": sum(
                    n for what, n in sdk.statuses.items() if "html" in what or what[:3] == "500"
                ),
                "slowest_answer_s": round(sdk.slowest_s, 2),
            },
            "lease_generation_column": has_generation,
            "alerts": {f"{kind}{' (' + cause + ')' if cause else ''}": n
                       for kind, cause, n in alert_rows},
            "recovery_alerts": recoveries,
            "lease_events": events,
            "strict": self.cluster.strict,
        }  # fmt: skip


def ha_line(ha: dict[str, Any]) -> str:
    return (
        f"ha: failovers={ha['failovers']} stale_accepted={ha['stale_accepted']} "
        f"same_order_two_holders={ha['same_order_two_holders']} "
        f"acknowledged_lost={ha['acknowledged_lost']} max_write_outage_s={ha['max_write_outage_s']}"
    )


def ha_ok(ha: dict[str, Any]) -> bool:
    return (
        ha["stale_accepted"] == 0
        and ha["same_order_two_holders"] == 0
        and ha["acknowledged_lost"] == 0
        and ha["second_primary_acked_writes"] == 0
        and not ha["errors"]
        and ("freeze_node" not in [f["fault"] for f in ha["faults"]]
             or ha["old_primary_back_as_replica_s"] is not None)
    )  # fmt: skip


def plan_for(kills: int, freeze_node: bool, freeze_postmaster: bool) -> list[str]:
    plan = ["kill"] * min(kills, 2)
    if freeze_node:
        plan.append("freeze_node")
    plan += ["kill"] * max(0, kills - 2)
    if freeze_postmaster:
        plan.append("freeze_postmaster")
    return plan


def run(
    *,
    agents: int = 20,
    kills: int = 3,
    freeze_node: bool = True,
    freeze_postmaster: bool = True,
    duration_s: float | None = None,
    port_base: int | None = None,
    strict: bool = False,
    ttl_ms: int = 15_000,
    seed: int = 0,
    json_out: str = "",
    sdk_agents: int = 6,
) -> dict[str, Any]:
    plan = plan_for(kills, freeze_node, freeze_postmaster)
    need = {"kill": 20, "freeze_node": TTL_S + 35, "freeze_postmaster": 20}
    duration = duration_s or 15 + sum(need[p] for p in plan)
    cfg = Config(
        duration_s=duration, agents=agents, restarts=False, ttl_ms=ttl_ms, db="leaseboard_ha",
        seed=seed, json_out=json_out, proc_kills=max(1, int(duration / 60)),
    )  # fmt: skip
    say(f"plan {plan} in {duration:.0f} s; load average {os.getloadavg()[0]:.1f}")
    out: dict[str, Any] = {"ok": False}
    from bench.common import setup_django

    chaos: HAChaos | None = None
    try:
        chaos = HAChaos(cfg, plan, port_base, strict, sdk_agents)
        chaos.start_servers()
        # The orchestrator's own Django (seeding, takeovers, the final sweep): the cluster.
        setup_django(**chaos.services.env())
        out = chaos.run()
    except Exception:
        traceback.print_exc()
        out = {"ok": False, "error": traceback.format_exc()}
    finally:
        if chaos is not None:
            chaos.stop_servers()
    out["load_average_at_end"] = round(os.getloadavg()[0], 1)
    out["ports_left_open"] = chaos.cluster.ports_in_use() if chaos is not None else []
    if json_out:
        Path(json_out).write_text(json.dumps(out, indent=2, default=str))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--no-freeze-node", action="store_true")
    parser.add_argument("--no-freeze-postmaster", action="store_true")
    parser.add_argument("--duration", type=float, default=None, help="seconds of load")
    parser.add_argument("--port-base", type=int, default=None, help="ports from here up")
    parser.add_argument("--strict", action="store_true", help="synchronous_mode_strict: true")
    parser.add_argument("--ttl-ms", type=int, default=15_000, help="the chaos queue's ttl")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sdk-agents", type=int, default=6, help="make faults' SDK agents")
    parser.add_argument("--json", default="")
    args = parser.parse_args()

    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    # Ctrl-C or SIGTERM (even when started in the background, where SIGINT is ignored): stop
    # every server on the way out.
    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    out = run(
        agents=args.agents, kills=args.kills, freeze_node=not args.no_freeze_node,
        freeze_postmaster=not args.no_freeze_postmaster, duration_s=args.duration,
        port_base=args.port_base, strict=args.strict, ttl_ms=args.ttl_ms, seed=args.seed,
        json_out=args.json, sdk_agents=args.sdk_agents,
    )  # fmt: skip
    ha = out.get("ha")
    if ha is None:
        print("ha: run failed before its figures", flush=True)
        return 1
    print(json.dumps({k: v for k, v in ha.items() if k != "examples"}, indent=2, default=str))
    print(f"load average at the end {out['load_average_at_end']}; ports left open "
          f"{out['ports_left_open']}", flush=True)  # fmt: skip
    print(ha_line(ha), flush=True)
    return 0 if ha_ok(ha) else 1


if __name__ == "__main__":
    sys.exit(main())
