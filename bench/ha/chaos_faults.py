"""The HA chaos run's cluster faults (`make ha-chaos`, bench/ha/chaos.py), each once the
cluster is healthy again: the primary's postmaster SIGKILLed, the whole primary node frozen
past Patroni's TTL and thawed, only the primary's postmaster frozen for 10 s. What each
fault did, and what was seen meanwhile, goes into a `ClusterFaults`. No Django import here.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from bench.common import sayer, wait_until
from bench.ha.cluster import Cluster
from bench.ha.nodes import TTL_S, Node
from bench.ha.probe import Probe

say = sayer("ha-chaos")
# The seconds each fault needs before the run ends, or it is skipped.
NEEDS_S = {"kill": 15, "freeze_node": TTL_S + 25, "freeze_postmaster": 18}


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


class FaultRunner:
    """Runs `faults.plan` on `cluster`; `db` is the run's database (a probe aims at it on
    a node directly), `db_url` the same through HAProxy, as the web nodes reach it."""

    def __init__(self, cluster: Cluster, faults: ClusterFaults, *, db: str, db_url: str) -> None:
        self.cluster = cluster
        self.faults = faults
        self.db = db
        self.db_url = db_url

    def run(self, run_until: float) -> None:
        """Every planned fault there is time for, each on a healthy cluster; then a healthy
        cluster at the end. A fault that fails is an error of the run, not its end."""
        cf = self.faults
        time.sleep(8)
        for i, what in enumerate(cf.plan):
            if time.time() + NEEDS_S[what] > run_until:
                cf.skipped.extend(cf.plan[i:])
                say(f"no time left for {cf.plan[i:]}")
                break
            try:
                wait_until(self.cluster.healthy, "a healthy cluster", 90, 0.25)
                time.sleep(3)
                getattr(self, what)()
            except Exception as exc:
                cf.errors.append(f"{what}: {type(exc).__name__}: {exc}")
                say(f"{what} failed: {exc}")
        try:
            wait_until(self.cluster.healthy, "a healthy cluster at the end", 90, 0.25)
        except RuntimeError as exc:
            cf.errors.append(str(exc))

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

    def _wait_healthy_again(self) -> None:
        wait_until(self.cluster.healthy, "the old primary back as a sync standby", 120, 0.25)

    def kill(self) -> None:
        old = self._primary()
        at, wall = time.monotonic(), time.time()
        self.cluster.kill_postmaster(old)
        say(f"SIGKILL of the primary's postmaster ({old.name})")
        promoted = self._wait_new_primary(old, 60)
        self._wait_healthy_again()
        self.faults.done.append(
            {"fault": "kill", "node": old.name, "at": at, "promoted_s": round(promoted, 1),
             "healthy_s": round(time.monotonic() - at, 1), "wall": wall, "wall_end": time.time()}
        )  # fmt: skip
        say(f"  new primary after {promoted:.1f} s; healthy after {time.monotonic() - at:.1f} s")

    def freeze_node(self) -> None:
        """Past the TTL: the other node promotes; on SIGCONT the old one must demote itself
        (Patroni) and come back as a replica, never acknowledging a write as a primary."""
        cf = self.faults
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
            direct = Probe("old-primary-direct", old.url(self.db)).start()
            thawed = time.monotonic()
            self.cluster.thaw_node(old)
        say(f"  {other.name} promoted after {promoted:.1f} s; thawed {old.name}")
        try:
            wait_until(
                lambda: self.cluster.writable(old) is False, "old primary a replica", 90, 0.2
            )
            cf.old_primary_back_as_replica_s = round(time.monotonic() - thawed, 1)
            time.sleep(2)
        finally:
            direct.close()
            watch.set()
            watcher.join(5)
        cf.second_primary_acked_writes += len(direct.acked)
        self._wait_healthy_again()
        cf.done.append(
            {"fault": "freeze_node", "node": old.name, "at": at, "frozen_s": freeze_s,
             "promoted_s": round(promoted, 1),
             "old_primary_replica_after_thaw_s": cf.old_primary_back_as_replica_s,
             "old_primary_acked_writes": len(direct.acked),
             "healthy_s": round(time.monotonic() - at, 1), "wall": wall, "wall_end": time.time()}
        )  # fmt: skip
        say(
            f"  {old.name} a replica {cf.old_primary_back_as_replica_s} s after "
            f"the thaw; it acknowledged {len(direct.acked)} writes meanwhile"
        )

    def _watch_two_primaries(self, stop: threading.Event) -> None:
        while not stop.is_set():
            if all(self.cluster.writable(n, timeout=0.5) for n in self.cluster.nodes):
                self.faults.both_claimed_primary_samples += 1
            stop.wait(0.25)

    def freeze_postmaster(self) -> None:
        """Only the postmaster: Patroni's own connection and every open backend go on, new
        connections wait. Patroni does not notice; nothing fails over."""
        node = self._primary()
        before = self.cluster.timeline()
        at, wall = time.monotonic(), time.time()
        # Writes on a new connection each, beside the run's probe on one kept open.
        fresh = Probe("fresh-connections", self.db_url, fresh=True).start()
        time.sleep(1)
        self.cluster.freeze_postmaster(node)
        say(f"froze only the postmaster of {node.name} for 10 s")
        try:
            time.sleep(10)
        finally:
            self.cluster.thaw_postmaster(node)
        time.sleep(3)
        fresh.close()
        self.faults.done.append(
            {"fault": "freeze_postmaster", "node": node.name, "at": at, "frozen_s": 10,
             "failed_over": self.cluster.timeline() != before,
             "still_primary": self.cluster.primary() is node,
             "new_connection_writes": {"acked": len(fresh.acked), "unknown": fresh.unknown,
                                       "failed": fresh.failed,
                                       "longest_gap_s": round(fresh.max_gap(), 2)},
             "wall": wall, "wall_end": time.time() + 5}
        )  # fmt: skip
