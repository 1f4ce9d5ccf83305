"""One soak agent process (bench/soak.py starts several): `--agents` simulated agents, each
holding one lease through the SDK's asyncio client under this process's one credential,
so the SDK's renewer renews them all in one batch request per tick. Beside them, each
second, this process proposes effects under a few random holdings and grants itself
`--abandon` fresh leases it never renews (they expire, and the sweep must find them).

Writes its figures as JSON to `--out` when the run is over: batch renew latencies, leases
renewed, effect latencies, lost holdings, errors by kind.

`SOAK_MEMPROBE=<dir>` (opt-in, off by default) writes where this process's memory goes to
`<dir>/<prefix>.jsonl` every `SOAK_MEMPROBE_S` seconds (30) while measuring: RSS, glibc's
heap (mallinfo2: in use, free), Python's allocated blocks, live objects by type, asyncio
tasks; with `SOAK_TRACEMALLOC=<frames>` also tracemalloc snapshots (`<prefix>-<n>.snap`,
compare them with bench/soak_memdiff.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.soak_memprobe import MemProbe
from leaseboard_client import AsyncClient
from leaseboard_client.errors import LeaseError

stats: dict[str, Any] = {
    "renew_ms": [],
    "renewed": 0,
    "batches": 0,
    "effect_ms": [],
    "effects": 0,
    "abandoned": 0,
    "lost": 0,
    "errors": Counter(),
}


def _timed_renewals() -> None:
    """Time every batch renew the SDK's renewer sends (the figure an agent waits for)."""
    original = AsyncClient.renew_many

    async def renew_many(self: AsyncClient, items: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            results = await original(self, items, *args, **kwargs)
        except Exception as exc:
            stats["errors"][f"renew:{type(exc).__name__}"] += 1
            raise
        if measuring:
            stats["renew_ms"].append((time.perf_counter() - started) * 1000)
            stats["renewed"] += len(items)
            stats["batches"] += 1
        return results

    AsyncClient.renew_many = renew_many  # type: ignore[method-assign]


measuring = False


async def run(args: argparse.Namespace) -> None:
    global measuring
    _timed_renewals()
    keys = [f"{args.prefix}-{i}" for i in range(args.agents)]
    spare = [f"{args.prefix}-x{i}" for i in range(args.spare)]
    async with AsyncClient(args.url, args.token) as client:
        holdings = []
        gate = asyncio.Semaphore(args.hold_concurrency)

        def lost(holding: Any, error: LeaseError) -> None:
            stats["lost"] += 1
            phase = "" if measuring else "warm-up "
            stats["errors"][f"{phase}lost:{error.code}"] += 1

        async def hold(key: str) -> None:
            async with gate:
                for attempt in range(10):
                    try:
                        holdings.append(await client.hold(key, on_lost=lost))
                        return
                    except LeaseError as exc:
                        stats["errors"][f"warm-up hold:{exc.code}"] += 1
                        await asyncio.sleep(0.5 * (attempt + 1))

        # Paced: at most --acquire-rate acquires start per second (and --hold-concurrency
        # in flight), so the warm-up grows the fleet no faster than the server grants
        # while the leases already held keep renewing (32 acquires in flight per process,
        # unpaced, starved the renewals of a 100,000-agent warm-up: most expired).
        started = time.monotonic()
        tasks = []
        for i, key in enumerate(keys):
            if args.acquire_rate > 0:
                await asyncio.sleep(max(0.0, started + i / args.acquire_rate - time.monotonic()))
            tasks.append(asyncio.create_task(hold(key)))
        await asyncio.gather(*tasks)
        stats["warm_up_s"] = round(time.monotonic() - started, 1)
        Path(args.out + ".ready").write_text(str(len(holdings)))
        while not Path(args.start_file).exists():
            await asyncio.sleep(0.2)
        stats["held_at_start"] = sum(1 for h in holdings if not h.lost)
        probe = MemProbe.from_env(
            args.prefix,
            extras={
                "renewer_holdings": lambda: len(client.renewer.holdings()),
                "pool": lambda: len(client._http._transport._pool.connections),  # type: ignore[attr-defined]
                "stats_values": lambda: len(stats["renew_ms"]) + len(stats["effect_ms"]),
            },
        )
        if probe is not None:
            probe.start()
        measuring = True
        end = time.monotonic() + args.seconds
        n = 0
        while time.monotonic() < end:
            tick = time.monotonic()
            for holding in random.sample(holdings, min(args.effects, len(holdings))):
                if holding.lost:
                    continue
                n += 1
                started = time.perf_counter()
                try:
                    await holding.propose(
                        kind="soak.effect", target="t", idempotency_key=f"{args.prefix}-e{n}"
                    )
                    stats["effect_ms"].append((time.perf_counter() - started) * 1000)
                    stats["effects"] += 1
                except LeaseError as exc:
                    stats["errors"][f"effect:{exc.code}"] += 1
            for _ in range(args.abandon):
                if not spare:
                    break
                try:
                    await client.acquire(spare.pop())  # never renewed: the sweep ends it
                    stats["abandoned"] += 1
                except LeaseError as exc:
                    stats["errors"][f"abandon:{exc.code}"] += 1
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
        measuring = False
        if probe is not None:
            probe.stop()
        stats["held_at_end"] = sum(1 for h in holdings if not h.lost)
        stats["errors"] = dict(stats["errors"])
        Path(args.out).write_text(json.dumps(stats))
        os._exit(0)  # leave the leases; the soak's database is dropped on the next run


def main() -> None:
    p = argparse.ArgumentParser()
    for name in ("url", "token", "prefix", "out", "start-file"):
        p.add_argument(f"--{name}", required=True)
    for name, default in (("agents", 500), ("seconds", 60), ("effects", 2), ("abandon", 1)):
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--spare", type=int, default=0)
    p.add_argument("--hold-concurrency", type=int, default=8)
    p.add_argument("--acquire-rate", type=float, default=0, help="acquires started/s (0: unpaced)")
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
