"""The chaos fleet (bench/chaos) on the HA cluster (`make ha-chaos`, bench/ha/chaos.py): its
servers set up and torn down, the SDK agents of make faults beside the chaos agents, the
cluster's faults in the background (bench/ha/chaos_faults.py) and the figures at the end
(bench/ha/chaos_figures.py).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from bench.chaos.orchestrator import Chaos, Config
from bench.chaos.services import Services
from bench.common import migrate, sayer
from bench.faults import BOUNDS_FROM_THE_SUITE
from bench.faults_fleet import Record
from bench.faults_fleet import agent as sdk_agent
from bench.ha.chaos_faults import ClusterFaults, FaultRunner
from bench.ha.chaos_figures import ha_figures
from bench.ha.cluster import Cluster
from bench.ha.probe import Probe, create_table
from bench.servers import OwnPostgres, OwnRedis

say = sayer("ha-chaos")


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
        # tests/pg_env.py's generous bounds must not leak into the servers when a test runs this.
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
        self.fault_runner = FaultRunner(
            self.cluster, self.cluster_faults, db=cfg.db, db_url=self.services.db_url
        )
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

    # -- the cluster's faults, with the probe and the SDK agents ------------------------------

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
        try:
            self.fault_runner.run(run_until)
        finally:
            self.sdk_stop.set()
            for t in self.sdk_threads:
                t.join(45)

    # -- the figures ----------------------------------------------------------------------------

    def finish(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        out = super().finish(records)
        if self.probe is not None:
            self.probe.close()
        out["ha"] = ha_figures(
            records,
            db_url=self.services.db_url,
            recipient_db_url=self.services.recipient_db_url,
            cluster=self.cluster,
            timeline_at_start=self.timeline_at_start,
            faults=self.cluster_faults,
            probe=self.probe,
            sdk=self.sdk_record,
            sdk_agents=self.sdk_agents,
        )
        return out
