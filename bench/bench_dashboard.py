"""Benchmark: the live leases page and its polled fragment with 100,000 leases in PostgreSQL.

Reports p50/p95 server time (Django test client: middleware, session, role check, selectors,
template) against a bare SELECT of the same page through the same connection as baseline.
Not a timed test. Run: `.venv/bin/python bench/bench_dashboard.py [--leases N] [--runs N]`.
Uses its own database (default `leaseboard_bench_dashboard` on 127.0.0.1), created and filled once.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import PG, ensure_database, setup_django


def _fill(n_leases: int) -> None:
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM core_lease")
        have = cur.fetchone()[0]
        if have >= n_leases:
            _refresh()
            return
        print(f"filling {n_leases} leases (once)...", flush=True)
        cur.execute("SELECT id FROM core_queue WHERE name = 'default'")
        queue_id = cur.fetchone()[0]
        cur.execute(
            "INSERT INTO core_executor (name, kind, is_active, created_at) "
            "SELECT 'bench-agent-' || g, 'agent', true, now() FROM generate_series(1, 1000) g "
            "ON CONFLICT (name) DO NOTHING"
        )
        now = "(floor(extract(epoch from now()) * 1000))::bigint"
        cur.execute(
            "INSERT INTO core_workitem (key, queue_id, title, scope, timing, admission, status, "
            "epoch, created_at_ms, admitted_at_ms) "
            f"SELECT 'bench-' || lpad(g::text, 7, '0'), %s, '', '{{}}', '{{}}', 'admitted', "
            f"'open', 1, {now}, {now} FROM generate_series(1, %s) g "
            "ON CONFLICT (key) DO NOTHING",
            [queue_id, n_leases],
        )
        # 90% live (a spread of jeopardy/expiry times around now), 10% expired recently.
        cur.execute(
            "INSERT INTO core_lease (id, work_item_id, holder_id, epoch, state, grant_kind, "
            "granted_at_ms, renewed_at_ms, jeopardy_at_ms, expires_at_ms, max_expires_at_ms, "
            "due_at_ms, ended_at_ms, ttl_ms, renew_after_ms, jeopardy_after_ms, lock_delay_ms, "
            "end_reason, takeover_reason, renew_count, max_gap_ms, recent_renewals) "
            "SELECT gen_random_uuid(), w.id, "
            "(SELECT min(id) FROM core_executor WHERE kind = 'agent') + (w.id % 1000), 1, "
            "CASE WHEN w.id % 10 = 0 THEN 'expired' ELSE 'active' END, 'acquire', "
            f"n - 600000, r, r + 10000, r + 15000, n + 86400000, "
            "r + 10000, CASE WHEN w.id % 10 = 0 THEN r + 15000 END, 15000, 5000, 10000, 0, "
            "CASE WHEN w.id % 10 = 0 THEN 'ttl elapsed' ELSE '' END, '', (w.id % 100), "
            "5000 + (w.id % 7000), '' "
            f"FROM core_workitem w, (SELECT {now} AS n) c, "
            "LATERAL (SELECT c.n - ((w.id * 7919) % 20000) AS r) t "
            "WHERE w.key LIKE 'bench-%%' AND NOT EXISTS "
            "(SELECT 1 FROM core_lease l WHERE l.work_item_id = w.id)"
        )
        cur.execute("ANALYZE")


def _refresh() -> None:
    """Bring the leases back to "now" (every time shifted by one amount), as if agents had
    kept renewing: with no agents and no sweep, the data would otherwise age into expiry
    while the benchmark runs."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "WITH s AS (SELECT (floor(extract(epoch from now()) * 1000))::bigint "
            "- max(renewed_at_ms) AS d FROM core_lease) UPDATE core_lease SET "
            "granted_at_ms = granted_at_ms + s.d, renewed_at_ms = renewed_at_ms + s.d, "
            "jeopardy_at_ms = jeopardy_at_ms + s.d, expires_at_ms = expires_at_ms + s.d, "
            "max_expires_at_ms = max_expires_at_ms + s.d, due_at_ms = due_at_ms + s.d, "
            "ended_at_ms = ended_at_ms + s.d FROM s"
        )
        cur.execute("VACUUM ANALYZE core_lease")


def _timed(fn, runs: int) -> tuple[float, float]:
    for _ in range(5):
        fn()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leases", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument(
        "--db",
        default=os.environ.get("BENCH_DATABASE_URL", f"{PG}/leaseboard_bench_dashboard"),
    )
    args = parser.parse_args()
    ensure_database(args.db)
    setup_django(DATABASE_URL=args.db)
    _fill(args.leases)

    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db import connection
    from django.test import Client

    from leaseboard.core.clock import now_ms_sql

    user, _ = get_user_model().objects.get_or_create(username="bench-operator")
    user.groups.add(Group.objects.get(name="operator"))
    client = Client()
    client.force_login(user)
    hx = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "live"}

    with connection.cursor() as cur:
        cur.execute("SELECT count(*), count(*) FILTER (WHERE state = 'active') FROM core_lease")
        total, live = cur.fetchone()
    print(f"leases: {total} ({live} live), runs: {args.runs}, page size 50\n")

    bare_sql = (
        "SELECT l.id, l.epoch, l.state, l.grant_kind, l.granted_at_ms, l.renewed_at_ms, "
        "l.jeopardy_at_ms, l.expires_at_ms, l.due_at_ms, l.ended_at_ms, l.end_reason, "
        "l.renew_count, l.max_gap_ms, l.jeopardy_after_ms, l.ttl_ms, w.key, q.name, e.name, "
        "e.kind FROM core_lease l JOIN core_workitem w ON w.id = l.work_item_id "
        "JOIN core_queue q ON q.id = w.queue_id JOIN core_executor e ON e.id = l.holder_id "
        "WHERE l.state IN ('active', 'jeopardy') ORDER BY l.due_at_ms, l.id LIMIT 51"
    )

    def bare() -> None:
        with connection.cursor() as cur:
            cur.execute(bare_sql)
            cur.fetchall()

    def bare_with_clock() -> None:
        with connection.cursor() as cur:
            cur.execute(f"SELECT {now_ms_sql()}")
            cur.fetchone()
            cur.execute(bare_sql)
            cur.fetchall()

    first = client.get("/", **hx)
    version = first["X-Leaseboard-Version"]
    cursor = first.content.decode().split("cursor=", 1)[1].split('"', 1)[0].split("&", 1)[0]

    cases = [
        ("baseline: bare SELECT of the page", bare),
        ("baseline: clock + bare SELECT", bare_with_clock),
        ("full page  GET /", lambda: client.get("/")),
        ("fragment   GET / (htmx poll)", lambda: client.get("/", **hx)),
        (
            "fragment   304 (unchanged version)",
            lambda: client.get("/", HTTP_X_LEASEBOARD_VERSION=version, **hx),
        ),
        ("fragment   page 2 (keyset cursor)", lambda: client.get(f"/?cursor={cursor}", **hx)),
        ("fragment   certainty=jeopardy", lambda: client.get("/?certainty=jeopardy", **hx)),
        ("fragment   certainty=expired", lambda: client.get("/?certainty=expired", **hx)),
        ("fragment   search q=bench-00042", lambda: client.get("/?q=bench-00042", **hx)),
    ]
    print(f"{'case':42} {'p50 ms':>8} {'p95 ms':>8}")
    for name, fn in cases:
        _refresh()
        p50, p95 = _timed(fn, args.runs)
        print(f"{name:42} {p50:8.2f} {p95:8.2f}", flush=True)


if __name__ == "__main__":
    main()
