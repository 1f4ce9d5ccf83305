"""Sweep cost follows the due leases, not all leases (docs/design.md §8).

    .venv/bin/python bench/bench_sweep.py [--leases 100000] [--batch 500]

Fills a scratch PostgreSQL database (BENCH_DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/leaseboard_bench_sweep; dropped, re-created and migrated
before each fill, as the audit log's guard refuses TRUNCATE) with live leases, makes 1% of
them due, times one full sweep, then does the same with 100% due, and prints both times and
their ratio. Not a test: numbers vary by machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from urllib.parse import urlparse

from bench.common import PG, recreate_database, setup_django

DEFAULT_URL = f"{PG}/leaseboard_bench_sweep"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leases", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()

    url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL)
    name = urlparse(url).path.lstrip("/")
    recreate_database(name)
    # The fill is one big INSERT: past the hot paths' 1.5 s statement bound (0 = none).
    setup_django(DATABASE_URL=url, LEASEBOARD_DB_STATEMENT_TIMEOUT_MS="0")
    from django.core.management import call_command
    from django.db import connection

    from leaseboard.core.models import Executor, Queue
    from leaseboard.sweeps import services
    from tests.builders import bulk_leases

    call_command("migrate", verbosity=0)
    Queue.objects.get_or_create(name="default")

    def fill(due: int) -> None:
        connection.close()
        recreate_database(name)
        call_command("migrate", verbosity=0)
        Queue.objects.get_or_create(name="default")
        holder, _ = Executor.objects.get_or_create(name="bench-agent", kind="agent")
        # Everyone renewed recently; `due` of them missed their renewals (jeopardy due).
        if args.leases - due:
            bulk_leases(
                args.leases - due,
                prefix="ok-",
                holder=holder,
                jeopardy_in_ms=600_000,
                expires_in_ms=900_000,
            )
        if due:
            bulk_leases(
                due, prefix="due-", holder=holder, jeopardy_in_ms=-100, expires_in_ms=900_000
            )
        # Settle the fill before timing: VACUUM sets the hint bits and visibility map a first
        # read would otherwise write, and a CHECKPOINT flushes the fill so no background
        # write-out of it lands inside the timed sweep (without both, one machine's 1%
        # sweep ranged 58-183 ms run to run).
        with connection.cursor() as cur:
            cur.execute("VACUUM ANALYZE core_lease")
            cur.execute("CHECKPOINT")

    def timed_sweep(due: int) -> float:
        fill(due)
        services.sweep_clock_tick()  # the sweep clock exists; no first-sweep bookkeeping
        started = time.perf_counter()
        report = services.sweep_run(batch_size=args.batch, max_batches=10**9)
        elapsed = time.perf_counter() - started
        assert report.jeopardy == due, (report.jeopardy, due)
        print(
            f"{args.leases:>8} live leases, {due:>7} due: {elapsed * 1000:9.1f} ms "
            f"({report.batches} batches, {len(report.alert_ids)} alerts)"
        )
        return elapsed

    one_percent = timed_sweep(args.leases // 100)
    all_due = timed_sweep(args.leases)
    print(
        f"1% due / 100% due = {one_percent / all_due:.4f} "
        f"(the 1% sweep costs {one_percent / all_due * 100:.2f}% of the 100% sweep)"
    )


if __name__ == "__main__":
    main()
