"""`make bench`: one bounded, loopback-only run that prints one table measured now.

The API's single renew, acquire and effect authorization under gunicorn, each beside the
bare-framework anchor (bench/bare/: a minimal Django project doing the same database work
in raw SQL, same gunicorn configuration, same wrk settings, same database) and, for renew,
the raw-SQL view inside the project's full middleware stack; batch renewals; pgbench running
the API's renew statement; etcd keep-alives (when installed); recipient-guard checks on
PostgreSQL and Redis; then bench_sweep.py / bench_dashboard.py. Load comes from `wrk`
(apt-get install wrk). Results also go to docs/benchmarks.md (not with --no-doc).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.baselines import bench_etcd, bench_guards, bench_pgbench
from bench.common import (
    PG,
    PY,
    ROOT,
    Server,
    django_env,
    migrate,
    recreate_database,
    sayer,
    setup_django,
    start_gunicorn,
)
from bench.loadgen import Load, wrk
from bench.report import (
    Row,
    anchor_table,
    failed_note,
    load_row,
    machine,
    table,
    targets,
    write_doc,
)

DB_NAME = os.environ.get("BENCH_DB", "leaseboard_bench")
DB_URL = f"{PG}/{DB_NAME}"
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
WORKERS = int(os.environ.get("BENCH_GUNICORN_WORKERS", "2"))
N_ITEMS = 24_000  # a fresh work item per acquire: 4,000 to warm, 20,000 measured
BATCH = 1000
VACUUMED = (
    "core_lease", "core_workitem", "core_leaseevent", "core_effect", "core_checkpoint",
    "bench_bare_item", "bench_bare_event",
)  # fmt: skip
say = sayer("bench")

# One wrk request per line; `item` is the next key, lease id or body of the connection.
ACQUIRE = 'return wrk.format("POST", "/api/v1/work-items/" .. item .. "/lease", headers, "{}")'
BARE_GRANT = 'return wrk.format("POST", "/grant/" .. item, headers, "{}")'
RENEW = 'return wrk.format("POST", "/api/v1/leases/" .. item .. "/renew", headers, \'{"epoch":1}\')'
RAW_RENEW = (
    'return wrk.format("POST", "/bench/raw-renew/" .. item .. "?h=%d", headers, \'{"epoch":1}\')'
)
BARE_RENEW = 'return wrk.format("POST", "/renew/" .. item .. "?h=%d", headers, \'{"epoch":1}\')'
BATCH_RENEW = 'return wrk.format("POST", "/api/v1/leases/renew", headers, item)'
EFFECT = (
    'return wrk.format("POST", "/api/v1/effects", headers, string.format('
    '\'{"lease_id":"%s","epoch":1,"kind":"bench.effect","target":"t",'
    '"idempotency_key":"k-%d-%d"}\', item, tid, n))'
)


def api_env() -> dict[str, str]:
    """The project's own settings plus the raw view (bench/settings_bench.py)."""
    return django_env(DB_URL, settings="bench.settings_bench", DB_CONN_MAX_AGE="600")


def bare_env() -> dict[str, str]:
    return django_env(DB_URL, settings="bench.bare.settings", DB_CONN_MAX_AGE="600")


def serve(app: str, env: dict[str, str]) -> Server:
    """The one gunicorn configuration every HTTP row is served by."""
    return start_gunicorn(app, env=env, workers=WORKERS, extra=("--backlog", "2048"))


# --- set-up ------------------------------------------------------------------------------


def seed() -> dict[str, Any]:
    """One agent, a long-ttl queue and N admitted work items (bulk insert, not the API); the
    bare project's items with the same keys."""
    import psycopg
    from django.db import connection

    from bench.bare.tables import create_and_seed
    from leaseboard.core.clock import db_now_ms
    from leaseboard.core.models import Queue, WorkItem
    from leaseboard.core.services.executors import agent_create

    timing = {
        "ttl_ms": 3_600_000,
        "renew_after_ms": 60_000,
        "jeopardy_after_ms": 3_000_000,
        "max_lifetime_ms": 86_400_000,
    }
    queue = Queue.objects.create(name="bench", timing=timing)
    executor, token = agent_create(name="bench-agent", queues=["bench"], actor_name="bench")
    now = db_now_ms()
    WorkItem.objects.bulk_create(
        [
            WorkItem(
                key=f"bench-{i}",
                queue=queue,
                admission="admitted",
                created_at_ms=now,
                admitted_at_ms=now,
            )
            for i in range(N_ITEMS)
        ],
        batch_size=2000,
    )
    with psycopg.connect(DB_URL, autocommit=True) as conn:
        create_and_seed(conn, N_ITEMS)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # fresh tables; the leases get theirs in vacuum()
    return {"executor_id": executor.id, "token": token, "executor": executor}


def top_up_leases(executor, want: int) -> list[str]:  # type: ignore[no-untyped-def]
    from leaseboard.core.models import Lease, WorkItem
    from leaseboard.core.services.leases import lease_acquire
    from leaseboard.domain.errors import LeaseboardError

    held = list(Lease.objects.filter(holder=executor, state="active").values_list("id", flat=True))
    if len(held) < want:
        free = WorkItem.objects.filter(queue__name="bench", epoch=0).values_list("key", flat=True)
        for key in list(free[: want - len(held) + 100]):
            try:
                lease_acquire(work_key=key, executor=executor)
            except LeaseboardError:  # a grant wrk had queued in gunicorn's backlog
                pass
        held = list(
            Lease.objects.filter(holder=executor, state="active").values_list("id", flat=True)
        )
    return [str(i) for i in held[:want]]


def vacuum() -> None:
    """Start every measurement from a vacuumed, analyzed database. The leases are made after
    seeding, and autovacuum (with its ANALYZE) is off on the project's machines: without
    fresh statistics the renew UPDATE walks the one bench agent's (holder, state) index
    entries instead of the primary key. And each renew is a non-HOT update (a new row
    version and an entry in each of core_lease's indexes), so every row would otherwise be
    measured on the garbage of all the rows before it (docs/benchmarks.md)."""
    import psycopg

    with psycopg.connect(DB_URL, autocommit=True) as conn:
        conn.execute(f"VACUUM (ANALYZE) {', '.join(VACUUMED)}")


def renew_plan(lease_id: str, holder: int) -> str:
    """The index the API's renew statement uses now (EXPLAIN only, nothing renewed)."""
    from django.db import connection

    from leaseboard.core.sql import lease_renew

    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + lease_renew("postgresql", 1), [lease_id, 1, holder])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    found = re.search(r"Scan using (\w+) on core_lease", plan)
    return found.group(1) if found else plan


# --- HTTP rows -----------------------------------------------------------------------------


def bench_http(
    api: Server, bare: Server, ctx: dict[str, Any], seconds: int
) -> tuple[list[Row], dict[str, Load], float]:
    """Returns the rows, the loads by name, and the best batch renewals/s."""
    token, holder = ctx["token"], ctx["executor_id"]
    rows: list[Row] = []
    res: dict[str, Load] = {}

    def load(server: Server, items: list[str], body: str, conns: int, threads: int = 2) -> Load:
        vacuum()
        return wrk(
            server.url, items, body, conns=conns, threads=threads, seconds=seconds, token=token
        )

    # Acquire: every request takes a fresh admitted work item; the bare grant the same keys.
    keys = [f"bench-{i}" for i in range(1, N_ITEMS)]
    # The first grant on a fresh database creates the fencing key; keep it out of the figure.
    _post(api.url + "/api/v1/work-items/bench-0/lease", token)
    # Warm every worker of both servers on keys of their own (2 s each): the first figure
    # of the run must not carry the workers' first requests (imports, compiled reads,
    # statements not yet prepared), which the renew rows below are spared the same way.
    # 4,000 keys: a fast machine grants over 1,500 in those 2 s, and a key granted twice
    # answers 409 work_leased.
    warm, keys = keys[-4000:], keys[:-4000]
    for server, script in ((api, ACQUIRE), (bare, BARE_GRANT)):
        wrk(server.url, warm, script, conns=4, threads=2, seconds=2, token=token)
    res["acquire"] = load(api, keys, ACQUIRE, 16)
    res["grant-1"] = load(bare, keys, BARE_GRANT, 16)
    rows.append(load_row("acquire via API (grants)", 16, res["acquire"], "grants/s"))
    rows.append(
        load_row("grant transaction, bare Django (lock, epoch + 1, event)", 16, res["grant-1"],
                 "grants/s", f"API acquire ÷ this: {res['acquire'].rate / res['grant-1'].rate:.2f}")
    )  # fmt: skip

    leases = top_up_leases(ctx["executor"], 6000)
    load(api, leases[:100], RENEW, 4)  # warm both API workers
    say(f"the renew statement reads core_lease through {renew_plan(leases[0], holder)}")
    for conns in (1, 4, 16):
        threads = 1 if conns == 1 else 2
        r_api = res[f"single-{conns}"] = load(api, leases, RENEW, conns, threads)
        r_raw = res[f"raw-{conns}"] = load(api, leases, RAW_RENEW % holder, conns, threads)
        r_bare = res[f"bare-{conns}"] = load(bare, leases, BARE_RENEW % holder, conns, threads)
        ratios = f"{r_api.rate / r_bare.rate:.2f}x bare, {r_api.rate / r_raw.rate:.2f}x raw view"
        rows += [
            load_row("renew, single, API", conns, r_api, "renewals/s", ratios),
            load_row("renew, raw-SQL view inside the project's middleware stack", conns, r_raw,
                     "renewals/s"),
            load_row("renew, bare Django (2 middleware, raw SQL)", conns, r_bare, "renewals/s"),
        ]  # fmt: skip

    # Batch: each connection renews its own 1000 leases per request.
    bodies = []
    for b in range(len(leases) // BATCH):
        chunk = leases[b * BATCH : (b + 1) * BATCH]
        bodies.append(json.dumps({"leases": [{"lease_id": i, "epoch": 1} for i in chunk]}))
    best_batch = 0.0
    for conns in (1, 2, 4):
        r = load(api, bodies[:conns], BATCH_RENEW, conns, conns)
        best_batch = max(best_batch, r.rate * BATCH)
        rows.append(
            Row(f"renew, batch of {BATCH}, API", str(conns), r.rate * BATCH, "renewals/s",
                r.p50_ms, r.p99_ms, f"{r.rate:.0f} req/s{failed_note(r.failed)}")
        )  # fmt: skip

    res["effects"] = load(api, leases, EFFECT, 16)
    res["grant-2"] = load(bare, keys, BARE_GRANT, 16)
    rows.append(load_row("effect authorization via API", 16, res["effects"], "effects/s"))
    rows.append(
        load_row("grant transaction, bare Django (again, beside effects)", 16, res["grant-2"],
                 "grants/s", f"API effects ÷ this: {res['effects'].rate / res['grant-2'].rate:.2f}")
    )  # fmt: skip
    return rows, res, best_batch


def anchor(res: dict[str, Load]) -> str:
    return anchor_table(
        [
            ("single renew", res["single-16"], "fenced renew UPDATE", res["bare-16"]),
            ("acquire", res["acquire"], "grant transaction", res["grant-1"]),
            ("effect authorization", res["effects"], "grant transaction", res["grant-2"]),
        ]
    )


def _post(url: str, token: str) -> None:
    import httpx

    httpx.post(url, json={}, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def run_others() -> list[str]:
    lines = []
    for name in ("bench_sweep.py", "bench_dashboard.py"):
        path = ROOT / "bench" / name
        if not path.exists():
            say(f"{name} not present; skipped")
            lines.append(f"- `bench/{name}`: not present in this checkout; skipped")
            continue
        say(f"running bench/{name}")
        try:
            out = subprocess.run(
                [PY, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=240,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )  # fmt: skip
            text = (out.stdout + ("\n" + out.stderr if out.returncode else "")).strip()
            print(text, flush=True)
            status = "ok" if out.returncode == 0 else f"exit {out.returncode}"
            lines.append(f"- `bench/{name}` ({status}):\n\n```\n{text[-3000:]}\n```")
        except subprocess.TimeoutExpired:
            lines.append(f"- `bench/{name}`: timed out after 240 s")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--seconds",
        type=int,
        default=int(os.environ.get("BENCH_SECONDS", "6")),
        help="seconds per measurement (BENCH_SECONDS, default 6)",
    )
    parser.add_argument("--no-others", action="store_true", help="skip the sweep/dashboard benches")
    parser.add_argument(
        "--no-doc", action="store_true", help="print only; leave docs/benchmarks.md alone"
    )
    args = parser.parse_args(argv)
    seconds = args.seconds
    started = time.time()
    if not shutil.which("wrk"):
        say("wrk is not installed: apt-get install -y wrk (the HTTP load generator)")
        return 1
    say(f"creating database {DB_NAME} and migrating")
    recreate_database(DB_NAME)
    migrate(api_env())
    setup_django(**api_env())
    ctx = seed()
    say(f"seeded {N_ITEMS} admitted work items; starting gunicorn (API and bare project)")
    api = serve("leaseboard.wsgi:application", api_env())
    try:
        bare = serve("bench.bare.wsgi:application", bare_env())
        try:
            rows, res, best_batch = bench_http(api, bare, ctx, seconds)
        finally:
            bare.stop()
    finally:
        api.stop()
    leases = top_up_leases(ctx["executor"], 6000)
    say("pgbench")
    vacuum()
    pg_rows, pg_tps = bench_pgbench(DB_URL, leases, ctx["executor_id"], seconds)
    say("etcd")
    etcd_rows, etcd = bench_etcd(seconds)
    say("recipient guards")
    rows += pg_rows + etcd_rows + bench_guards(DB_URL, REDIS_URL, seconds)
    others = [] if args.no_others else run_others()
    lines = targets(res, best_batch, pg_tps, etcd)
    sections = [
        ("", table(rows)),
        ("API ÷ bare Django (same gunicorn, same wrk settings, this run):", anchor(res)),
        ("Targets:", "\n".join(lines)),
    ]
    if others:
        sections.append(("Other benches:", "\n".join(others)))
    for title, content in sections:
        print(f"\n{title}\n\n{content}" if title else f"\n{content}")
    where = machine(DB_URL, WORKERS, seconds)
    print(f"\n[bench] total {time.time() - started:.0f} s on {where}")
    if not args.no_doc:
        say(f"wrote {write_doc(where, sections).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
