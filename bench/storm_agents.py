"""One survivor process of the storm (bench/storm.py starts several): one agent credential
renewing its share of the surviving leases through the SDK's batch renew
(`AsyncClient.renew_many`, chunked at the server's limit) every `--every-s` seconds until
`--stop-file` exists. Writes, to `--out`: each batch's send time (epoch s) and latency, the
leases renewed, and errors by kind (a lease the server says is lost is an error here: a
survivor must survive).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from leaseboard_client import AsyncClient
from leaseboard_client.errors import LeaseError


async def run(args: argparse.Namespace) -> None:
    leases = [tuple(x) for x in json.loads(Path(args.leases).read_text())]
    batches: list[tuple[float, float]] = []
    errors: Counter[str] = Counter()
    renewed = 0
    chunk = 500
    async with AsyncClient(args.url, args.token) as client:
        while not Path(args.stop_file).exists():
            tick = time.monotonic()
            for start in range(0, len(leases), chunk):
                part = leases[start : start + chunk]
                sent = time.time()
                began = time.perf_counter()
                try:
                    results = await client.renew_many(part)
                except LeaseError as exc:
                    errors[f"renew:{exc.code}"] += 1
                    continue
                except Exception as exc:  # a transport error counts, the run goes on
                    errors[f"renew:{type(exc).__name__}"] += 1
                    continue
                batches.append((sent, (time.perf_counter() - began) * 1000))
                for result in results:
                    if getattr(result, "ok", True):
                        renewed += 1
                    else:
                        errors[f"lost:{getattr(result, 'code', '?')}"] += 1
                if not Path(args.ready_file).exists():
                    Path(args.ready_file).write_text("1")
            await asyncio.sleep(max(0.0, args.every_s - (time.monotonic() - tick)))
    Path(args.out).write_text(
        json.dumps({"batches": batches, "renewed": renewed, "errors": dict(errors)})
    )


def main() -> None:
    p = argparse.ArgumentParser()
    for name in ("url", "token", "leases", "out", "stop-file", "ready-file"):
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--every-s", type=float, default=2.0)
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
