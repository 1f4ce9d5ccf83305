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

The run on the cluster is bench/ha/chaos_run.py, the cluster's faults chaos_faults.py, the
figures and the verdict chaos_figures.py; here the plan and the command line.

    .venv/bin/python -m bench.ha.chaos [--agents 20] [--kills 3] [--port-base 27500]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
from bench.chaos.orchestrator import Config
from bench.common import sayer
from bench.ha.chaos_figures import ha_line, ha_ok
from bench.ha.chaos_run import HAChaos
from bench.ha.nodes import TTL_S

say = sayer("ha-chaos")


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
