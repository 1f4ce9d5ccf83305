"""Benchmark: the live leases page and its polled fragment with 100,000 leases, and the
alerts page with 10,000 open alerts grouped by agent and kind, in PostgreSQL.

Reports p50/p95 server time (Django test client: middleware, session, role check, selectors,
template) against a bare SELECT of the same page through the same connection as baseline,
and each case's target (issue 13: p95 <= 100 ms for the live page at 100k leases and for the
grouped alerts page at 10k open alerts). Not a timed test. Run:
`.venv/bin/python bench/bench_dashboard.py [--leases N] [--alerts N] [--runs N]`.
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
from bench.common import BENCH_AUDIT_KEY, PG, ensure_database, setup_django

TARGET_MS = 100.0
SEARCH_TARGET_MS = 25.0  # issue 14: work-key search at 100k leases (pg_trgm index)


def _fill_alerts(n_alerts: int) -> None:
    """Open alerts about the first leases' holders (1,000 agents), of four kinds, opened over
    the last hour: ~4,000 groups of a few alerts each, as after a bad hour."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM core_alert WHERE resolved_at_ms IS NULL")
        if cur.fetchone()[0] >= n_alerts:
            return
        print(f"filling {n_alerts} open alerts (once)...", flush=True)
        now = "(floor(extract(epoch from now()) * 1000))::bigint"
        cur.execute(
            "WITH l AS (SELECT id, work_item_id, epoch, row_number() OVER (ORDER BY id) AS rn "
            "FROM core_lease ORDER BY id LIMIT 5000) "
            "INSERT INTO core_alert (kind, dedupe_key, lease_id, work_item_id, epoch, message, "
            "detail, due_at_ms, opened_at_ms, acknowledge_note) "
            "SELECT (ARRAY['jeopardy','expired','stale_effect','recipient_refusal'])[1 + g %% 4], "
            "'bench:' || g, l.id, l.work_item_id, l.epoch, "
            "'bench alert ' || g, '{}', c.n - (g * 360) %% 3600000, c.n - (g * 360) %% 3600000, '' "
            f"FROM generate_series(1, %s) g JOIN l ON l.rn = 1 + g %% 5000, (SELECT {now} AS n) c "
            "ON CONFLICT (dedupe_key) DO NOTHING",
            [n_alerts],
        )
        cur.execute("ANALYZE core_alert")


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
            "INSERT INTO core_executor (name, kind, is_active, created_at, queues, all_queues) "
            "SELECT 'bench-agent-' || g, 'agent', true, now(), '[]', true "
            "FROM generate_series(1, 1000) g "
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


def _refresh(healthy: bool = False) -> None:
    """Bring the leases back to "now" (every time shifted by one amount), as if agents had
    kept renewing: with no agents and no sweep, the data would otherwise age into expiry
    while the benchmark runs. The fill spreads renewals over 20 s, so half the live leases
    are then past their jeopardy time; `healthy` instead dates every active lease's last
    renewal in the last 2 s (a fleet renewing on time: none in jeopardy, none expired),
    where a counter that scans for the few leases in trouble finds none."""
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
        if healthy:
            ago = "abs(hashtext(id::text)) % 2000"  # 0–2 s, a fixed spread per lease
            r = f"((floor(extract(epoch from now()) * 1000))::bigint - {ago})"
            cur.execute(
                f"UPDATE core_lease SET jeopardy_at_ms = jeopardy_at_ms - renewed_at_ms + {r}, "
                f"expires_at_ms = expires_at_ms - renewed_at_ms + {r}, "
                f"due_at_ms = due_at_ms - renewed_at_ms + {r}, renewed_at_ms = {r} "
                "WHERE state = 'active'"
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
    parser.add_argument("--alerts", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--only", default="", help="run only the cases whose name has this")
    parser.add_argument(
        "--healthy",
        action="store_true",
        help="every active lease renewed in the last 2 s before each case (none in trouble)",
    )
    parser.add_argument(
        "--db",
        default=os.environ.get("BENCH_DATABASE_URL", f"{PG}/leaseboard_bench_dashboard"),
    )
    args = parser.parse_args()
    ensure_database(args.db)
    # The fill is a few big INSERTs: past the hot paths' 1.5 s statement bound (0 = none).
    setup_django(
        DATABASE_URL=args.db,
        LEASEBOARD_AUDIT_KEY=BENCH_AUDIT_KEY,
        LEASEBOARD_DB_STATEMENT_TIMEOUT_MS="0",
    )
    _fill(args.leases)
    _fill_alerts(args.alerts)

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
        cur.execute("SELECT count(*) FROM core_alert WHERE resolved_at_ms IS NULL")
        open_alerts = cur.fetchone()[0]
    print(
        f"leases: {total} ({live} live), open alerts: {open_alerts}, runs: {args.runs}, "
        "page size 50\n"
    )

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

    alerts_hx = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "alert-groups"}
    first_alerts = client.get("/alerts/", **alerts_hx)
    alerts_version = first_alerts["X-Leaseboard-Version"]

    # (name, call, target p95 or None)
    cases = [
        ("baseline: bare SELECT of the page", bare, None),
        ("baseline: clock + bare SELECT", bare_with_clock, None),
        ("full page  GET /", lambda: client.get("/"), TARGET_MS),
        ("fragment   GET / (htmx poll)", lambda: client.get("/", **hx), TARGET_MS),
        (
            "fragment   304 (unchanged version)",
            lambda: client.get("/", HTTP_X_LEASEBOARD_VERSION=version, **hx),
            TARGET_MS,
        ),
        (
            "fragment   page 2 (keyset cursor)",
            lambda: client.get(f"/?cursor={cursor}", **hx),
            TARGET_MS,
        ),
        ("fragment   sort=key (work key)", lambda: client.get("/?sort=key", **hx), TARGET_MS),
        ("fragment   sort=due (time left)", lambda: client.get("/?sort=due", **hx), TARGET_MS),
        ("fragment   sort=holder", lambda: client.get("/?sort=holder", **hx), TARGET_MS),
        ("fragment   certainty=jeopardy", lambda: client.get("/?certainty=jeopardy", **hx), None),
        ("fragment   certainty=expired", lambda: client.get("/?certainty=expired", **hx), None),
        (
            "fragment   search q=bench-00042",
            lambda: client.get("/?q=bench-00042", **hx),
            SEARCH_TARGET_MS,
        ),
        (
            "fragment   search q=42 (short: no trigram)",
            lambda: client.get("/?q=42", **hx),
            None,
        ),
        ("alerts     GET /alerts/ (grouped)", lambda: client.get("/alerts/"), TARGET_MS),
        (
            "alerts     fragment (poll, grouped)",
            lambda: client.get("/alerts/", **alerts_hx),
            TARGET_MS,
        ),
        (
            "alerts     fragment 304",
            lambda: client.get("/alerts/", HTTP_X_LEASEBOARD_VERSION=alerts_version, **alerts_hx),
            TARGET_MS,
        ),
        ("alerts     one by one", lambda: client.get("/alerts/?view=list"), None),
    ]
    print(f"{'case':42} {'p50 ms':>8} {'p95 ms':>8}  target")
    failed = []
    for name, fn, target in cases:
        if args.only and args.only not in name:
            continue
        _refresh(args.healthy)
        p50, p95 = _timed(fn, args.runs)
        verdict = "" if target is None else ("ok" if p95 <= target else "OVER")
        mark = f"  p95 <= {target:.0f} ms: {verdict}" if target else ""
        print(f"{name:42} {p50:8.2f} {p95:8.2f}{mark}", flush=True)
        if verdict == "OVER":
            failed.append(name)
    if failed:
        print(f"\nover their targets: {', '.join(failed)}")


if __name__ == "__main__":
    main()
