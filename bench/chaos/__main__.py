"""The command line of `make chaos`; `python -m bench.chaos _agent CONFIG` is one agent
process (started by agents.Fleet)."""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

import bench.chaos
from bench.chaos.agents import agent_process
from bench.chaos.orchestrator import Chaos, Config
from bench.chaos.services import ensure_services


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_agent"]:
        return agent_process(argv[1])
    parser = argparse.ArgumentParser(
        prog="python -m bench.chaos", description=(bench.chaos.__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--duration", type=float, default=90.0, help="seconds of load (90)")
    parser.add_argument("--agents", type=int, default=50, help="number of agents (50)")
    parser.add_argument("--no-restarts", action="store_true", help="no PostgreSQL/Redis restarts")
    parser.add_argument("--ttl-ms", type=int, default=5000)
    parser.add_argument("--db", default="leaseboard_chaos")
    parser.add_argument("--redis-db", type=int, default=13)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default="", help="write the results here")
    parser.add_argument(
        "--no-epoch-notices",
        action="store_true",
        help="the late_notified recipient does not register for epoch notices",
    )
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
        epoch_notices=not args.no_epoch_notices,
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
            chaos.services.stop_all()
        finally:
            ensure_services()
    if cfg.json_out:
        Path(cfg.json_out).write_text(json.dumps(out, indent=2, default=str))
    return 0 if out.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
