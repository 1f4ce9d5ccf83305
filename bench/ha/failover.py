"""HAProxy or libpq multi-host? Both write probes (bench/ha/probe.py) run side by side while
the primary's postmaster is SIGKILLed `--kills` times (each once the cluster is healthy
again); prints the write outage each path saw per kill, and rows acknowledged but lost.

    .venv/bin/python -m bench.ha.failover [--kills 3] [--port-base 27500] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
from bench.common import sayer, wait_until
from bench.ha.cluster import Cluster
from bench.ha.nodes import TTL_S
from bench.ha.probe import Probe, create_table

say = sayer("ha-failover")


def kill_primary(cluster: Cluster, probes: list[Probe], k: int) -> dict:
    """SIGKILL of the primary's postmaster; how long until a new primary and the old one
    back as a sync standby, and the outage each probe's path saw."""
    victim = cluster.primary()
    assert victim is not None
    at = time.monotonic()
    cluster.kill_postmaster(victim)
    say(f"kill {k + 1}: SIGKILL of {victim.name}'s postmaster")
    wait_until(
        lambda: (p := cluster.primary()) is not None and p is not victim, "a new primary", 60, 0.1
    )
    promoted = time.monotonic() - at
    wait_until(cluster.healthy, "the old primary back as a sync standby", 120, 0.2)
    rejoined = time.monotonic() - at
    time.sleep(3)
    gaps = {p.path: round(p.gap_around(at) or -1, 2) for p in probes}
    say(f"  promoted +{promoted:.1f} s, rejoined +{rejoined:.1f} s, outage {gaps}")
    return {"promoted_s": round(promoted, 1), "rejoined_s": round(rejoined, 1), "outage_s": gaps}


def freeze_primary(cluster: Cluster, probes: list[Probe]) -> dict:
    """The whole primary node frozen past the TTL, thawed; the outage each path saw."""
    victim = cluster.primary()
    assert victim is not None
    at = time.monotonic()
    cluster.freeze_node(victim)
    say(f"froze {victim.name} (Patroni and PostgreSQL) for {TTL_S + 6} s")
    time.sleep(TTL_S + 6)
    cluster.thaw_node(victim)
    wait_until(cluster.healthy, "the old primary back as a sync standby", 180, 0.2)
    time.sleep(3)
    gaps = {p.path: round(p.gap_around(at) or -1, 2) for p in probes}
    say(f"  freeze: outage {gaps}")
    return {"outage_s": gaps, "healthy_s": round(time.monotonic() - at, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--port-base", type=int, default=None)
    parser.add_argument("--strict", action="store_true", help="synchronous_mode_strict")
    parser.add_argument(
        "--freeze", action="store_true", help="then freeze the whole primary node past the TTL"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    cluster = Cluster(port_base=args.port_base, strict=args.strict)
    out: dict = {"kills": [], "strict": args.strict}
    try:
        cluster.start()
        url = cluster.create_database("probe")
        create_table(url)
        probes = [
            Probe("haproxy", url).start(),
            Probe("multihost", cluster.multihost_url("probe")).start(),
        ]
        time.sleep(3)
        for k in range(args.kills):
            out["kills"].append(kill_primary(cluster, probes, k))
        if args.freeze:
            out["freeze"] = freeze_primary(cluster, probes)
        for p in probes:
            p.close()
        final = cluster.url("probe")
        out["paths"] = {
            p.path: {"acked": len(p.acked), "unknown": p.unknown, "failed": p.failed,
                     "lost": p.lost(final), "max_gap_s": round(p.max_gap(), 2)}
            for p in probes
        }  # fmt: skip
    finally:
        cluster.stop()
    out["load_average"] = round(os.getloadavg()[0], 1)
    out["ports_left_open"] = cluster.ports_in_use()
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0 if all(p["lost"] == 0 for p in out.get("paths", {}).values()) else 1


if __name__ == "__main__":
    sys.exit(main())
