"""What the middleware costs a request, in-process: CPU microseconds per request through
Django's test client for a request under /api/ that no operation serves (a 404 problem:
no database, no ninja, so the middleware and URL resolution are most of what runs), with
a bearer token (the agents' lane) and without one (the full stack), on this tree and, with
`--before DIR`, on another checkout, interleaved in rounds:

    .venv/bin/python bench/bench_lane.py [--before DIR] [--rounds 5] [--n 3000]

Each measurement is a fresh process (`--child`) that warms up, then times N requests with
`time.process_time()`: CPU time of that process, which moves far less with the machine's
load than a wall-clock rate does. Prints each round and the medians; for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import PG, PY, ROOT, django_env, sayer

say = sayer("bench_lane")
# A migrated database (the full stack's 404 reads it): `bench/hotpaths.py`'s by default.
DB_URL = f"{PG}/" + os.environ.get("BENCH_DB", "leaseboard_bench_hot")
PATH = "/api/v1/leases/no-such-operation/here"
CASES = {  # name -> (tree, LEASEBOARD_API_LANE, bearer token?)
    "lane": ("this", "true", True),
    "no lane (full stack), bearer": ("this", "false", True),
    "full stack, no bearer": ("this", "true", False),
    "before: lane": ("before", "true", True),
    "before: full stack, no bearer": ("before", "true", False),
}


def child(n: int, bearer: bool) -> None:
    sys.path.insert(0, os.environ["BENCH_TREE"])  # that tree's leaseboard, not this one's
    import django

    django.setup()
    import logging

    from django.test import Client

    logging.getLogger("django.request").setLevel(logging.ERROR)  # no "Not Found" line each

    client = Client()
    headers = {"HTTP_AUTHORIZATION": "Bearer not-a-token"} if bearer else {}
    for _ in range(300):
        r = client.get(PATH, **headers)
        assert r.status_code == 404 and r["Content-Type"].startswith("application/problem"), r
    started = time.process_time()
    for _ in range(n):
        client.get(PATH, **headers)
    print(json.dumps({"us": (time.process_time() - started) / n * 1e6}))


def measure(tree: Path, lane: str, bearer: bool, n: int) -> float:
    env = django_env(DB_URL, LEASEBOARD_API_LANE=lane, PYTHONPATH=str(tree))
    env.update(DJANGO_SETTINGS_MODULE="leaseboard.settings", BENCH_TREE=str(tree))
    cmd = [PY, str(ROOT / "bench" / "bench_lane.py"), "--child", str(n)]
    if bearer:
        cmd.append("--bearer")
    out = subprocess.run(cmd, cwd=tree, env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["us"]


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--before", type=Path)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--n", type=int, default=3000)
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    p.add_argument("--bearer", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child, args.bearer)
        return 0
    trees = {"this": ROOT, "before": args.before}
    cases = {k: v for k, v in CASES.items() if trees[v[0]] is not None}
    got: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(args.rounds):
        say(f"round {r + 1}/{args.rounds}, load average {os.getloadavg()[0]:.2f}")
        for name, (tree, lane, bearer) in cases.items():
            us = measure(trees[tree], lane, bearer, args.n)  # type: ignore[arg-type]
            got[name].append(us)
            say(f"  {name:32} {us:7.1f} µs CPU per request")
    print(f"\nmedians of {args.rounds} rounds, {args.n} requests each; load average now "
          f"{os.getloadavg()[0]:.2f}\n")  # fmt: skip
    print("| case | µs CPU per request | ÷ lane |")
    print("|---|---|---|")
    lane_us = statistics.median(got["lane"])
    for name, values in got.items():
        us = statistics.median(values)
        print(f"| {name} | {us:.1f} | {us / lane_us:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
