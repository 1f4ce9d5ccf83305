"""cProfile of one hot path through Django's test client (the API lane, ninja, the services,
real PostgreSQL), for docs/benchmarks.md's "where the remaining time goes":

    .venv/bin/python bench/profile_paths.py renew|acquire|effect|batch [N] [--leases L]

Creates a scratch database (BENCH_DATABASE_URL, default .../leaseboard_bench_profile),
an agent, a long-ttl queue and admitted work items, holds L leases (default 100; the batch
renews all of them in one request), warms up, then profiles N requests (default 300) and
prints the time per request, the shares of the main parts, and the statements of one
request. Not a timed test: under the profiler absolute times are inflated; compare shares.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import BENCH_AUDIT_KEY, BENCH_FENCING_KEK, PG, recreate_database, setup_django

# (label, a fragment of the profiled function's "file:line(name)")
PARTS = (
    ("the API lane and everything under it", "api/lane.py"),
    ("ninja: parsing, the view, the response", "ninja/operation.py:222(run)"),
    ("waiting on PostgreSQL", "psycopg/connection.py:479(wait)"),
    ("renew statement", "(_renew_fast)"),
    ("item lock and gate reads (compiled once)", "(_gates)"),
    ("grant statement", "(grant_write)"),
    ("effect decision (lock, clock, policy, insert)", "(_effect_decide)"),
    ("  its standing step (verdict, fence)", "(effect_standing_refusal)"),
    ("  its policy step (the queue's rules)", "(effect_policy_step)"),
    ("effect insert", "(model_insert)"),
    ("clock + policy version", "(clock_and_policy_version)"),
    ("token signing", "(fencing_token_issue)"),
    ("URL resolution", "(resolve_request)"),
    # OpenTelemetry off (no provider): the decision spans' and trace ids' checks.
    ("tracing off: is a provider installed?", "(tracing_on)"),
    ("tracing off: the effect's trace id", "(current_trace_id)"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", choices=("renew", "acquire", "effect", "batch"))
    parser.add_argument("n", type=int, nargs="?", default=300)
    parser.add_argument("--leases", type=int, default=100)
    args = parser.parse_args()
    url = os.environ.get("BENCH_DATABASE_URL", f"{PG}/leaseboard_bench_profile")
    recreate_database(urlparse(url).path.lstrip("/"))
    setup_django(
        DATABASE_URL=url,
        DEBUG="false",
        ALLOWED_HOSTS="*",
        LEASEBOARD_AUDIT_KEY=BENCH_AUDIT_KEY,
        LEASEBOARD_FENCING_KEK=BENCH_FENCING_KEK,
        LEASEBOARD_RATE_LIMIT_ENABLED="false",
    )
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from leaseboard.core.clock import db_now_ms
    from leaseboard.core.models import Queue, WorkItem
    from leaseboard.core.services.executors import agent_create
    from leaseboard.core.services.leases import lease_acquire

    call_command("migrate", verbosity=0)
    queue = Queue.objects.create(
        name="profile",
        timing={
            "ttl_ms": 3_600_000,
            "renew_after_ms": 60_000,
            "jeopardy_after_ms": 3_000_000,
            "max_lifetime_ms": 86_400_000,
        },
    )
    executor, token = agent_create(name="profile-agent", queues=["profile"], actor_name="bench")
    now = db_now_ms()
    n_items = args.leases + args.n + 50
    WorkItem.objects.bulk_create(
        [
            WorkItem(
                key=f"p-{i}",
                queue=queue,
                admission="admitted",
                created_at_ms=now,
                admitted_at_ms=now,
            )  # fmt: skip
            for i in range(n_items)
        ],
        batch_size=2000,
    )
    leases = [
        str(lease_acquire(work_key=f"p-{i}", executor=executor).lease.id)
        for i in range(args.leases)
    ]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_HOST="localhost")
    batch_body = json.dumps({"leases": [{"lease_id": lid, "epoch": 1} for lid in leases]})
    free = iter(range(args.leases, n_items))

    def request(i: int) -> None:
        if args.path == "renew":
            r = client.post(f"/api/v1/leases/{leases[i % len(leases)]}/renew", '{"epoch":1}',
                            content_type="application/json")  # fmt: skip
        elif args.path == "batch":
            r = client.post("/api/v1/leases/renew", batch_body, content_type="application/json")
        elif args.path == "acquire":
            r = client.post(f"/api/v1/work-items/p-{next(free)}/lease", "{}",
                            content_type="application/json")  # fmt: skip
        else:
            body = {"lease_id": leases[i % len(leases)], "epoch": 1, "kind": "bench.effect",
                    "target": "t", "idempotency_key": f"k-{i}"}  # fmt: skip
            r = client.post("/api/v1/effects", json.dumps(body), content_type="application/json")
        assert r.status_code in (200, 201), r.content

    for i in range(10):
        request(10**6 + i)  # warm: URL map, compiled reads, signing key
    profile = cProfile.Profile()
    started = time.perf_counter()
    profile.enable()
    for i in range(args.n):
        request(i)
    profile.disable()
    elapsed = time.perf_counter() - started
    each_ms = elapsed / args.n * 1000
    print(f"{args.path}: {args.n} requests in {elapsed:.2f} s, {each_ms:.2f} ms each (profiled)")

    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.sort_stats("cumulative").print_stats()
    total = stats.total_tt  # type: ignore[attr-defined]
    found: dict[str, float] = {}
    for line in out.getvalue().splitlines():
        fields = line.split()
        if len(fields) < 6:
            continue
        for label, fragment in PARTS:
            if label not in found and fragment in fields[-1]:
                found[label] = float(fields[3])
    for label, _ in PARTS:
        if label in found:
            print(f"  {label:48s} {found[label] / total * 100:6.2f}%")
    with CaptureQueriesContext(connection) as queries:
        request(2 * 10**6)
    print(f"one request's statements ({len(queries.captured_queries)}):")
    for query in queries.captured_queries:
        print(f"  {(query['sql'] or '(not shown: parameters Django cannot compose)')[:110]}")


if __name__ == "__main__":
    main()
