"""The three single-request hot paths — renew, acquire, effect authorization — measured in
rounds that interleave the API with the bare-framework anchor (bench/bare/), so every
ratio compares measurements taken seconds apart under the same load from the rest of the
machine. Optionally beside other servers on the same database in the same rounds:

- `--before DIR`: an older tree served the same way (e.g. main:
  `git archive main | tar -x -C DIR`), for before/after figures from one run;
- `--variant NAME:VAR=VALUE,...[@WORKERS:CLASS:THREADS]`: this tree with environment
  overrides (e.g. `nolane:LEASEBOARD_API_LANE=false`) and/or its own gunicorn workers
  (e.g. `gthread:@2:gthread:4`, `sync4:@4:sync:0`).

Prints each measurement and, per path and server, the median rate and p99 over the rounds
and the median of the per-round ratios to the bare anchor, and where the CPU went: the
server's processes and the PostgreSQL backends of the bench database, in CPU microseconds
per request. Both share the machine's cores, so a saturated path's rate is about the cores'
CPU seconds per second over its CPU per request: that says where a ratio is lost, even on
a busy machine. `make bench` stays the one complete table; this is for measuring one
change at a time on a busy machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import run_all
from bench.common import (
    PG,
    Server,
    django_env,
    migrate,
    recreate_database,
    sayer,
    setup_django,
    start_gunicorn,
)
from bench.loadgen import Load, wrk

say = sayer("hotpaths")
DB_NAME = os.environ.get("BENCH_DB", "leaseboard_bench_hot")
DB_URL = f"{PG}/{DB_NAME}"
SLICE = 4000  # fresh work items per acquire measurement

EFFECT = (
    'return wrk.format("POST", "/api/v1/effects", headers, string.format('
    '\'{"lease_id":"%%s","epoch":1,"kind":"bench.effect","target":"t",'
    '"idempotency_key":"k-%s-%%d-%%d"}\', item, tid, n))'
)
BODIES = {
    ("renew", "api"): run_all.RENEW,
    ("renew", "bare"): run_all.BARE_RENEW,
    ("acquire", "api"): run_all.ACQUIRE,
    ("acquire", "bare"): run_all.BARE_GRANT,
    ("effect", "bare"): run_all.BARE_GRANT,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=int, default=4)
    p.add_argument("--conns", type=int, default=16)
    p.add_argument("--paths", default="renew,acquire,effect")
    p.add_argument("--before", type=Path, help="an older tree to serve beside this one")
    p.add_argument("--variant", action="append", default=[], help="NAME:VAR=VALUE,...")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--worker-class", default="sync")
    p.add_argument("--threads", type=int, default=0)
    args = p.parse_args(argv)
    paths = args.paths.split(",")

    say(f"creating database {DB_NAME} and migrating")
    run_all.DB_URL = DB_URL
    run_all.N_ITEMS = 8000 + SLICE * args.rounds * (2 + len(args.variant) + bool(args.before))
    recreate_database(DB_NAME)
    api_env = django_env(DB_URL, DB_CONN_MAX_AGE="600")
    migrate(api_env)
    setup_django(**api_env)
    ctx = run_all.seed()
    leases = bulk_leases(ctx["executor"], 6000)
    from leaseboard.core.models import WorkItem

    free = list(
        WorkItem.objects.filter(queue__name="bench", epoch=0)
        .order_by("id")
        .values_list("key", flat=True)
    )
    say(f"{len(leases)} leases held, {len(free)} free items")

    def serve(app: str, env: dict[str, str], cwd: Path | None = None, gunicorn: str = "") -> Server:
        extra = {"cwd": cwd} if cwd else {}
        workers, worker_class, threads = args.workers, args.worker_class, args.threads
        if gunicorn:
            w, worker_class, t = gunicorn.split(":")
            workers, threads = int(w), int(t)
        return start_gunicorn(
            app, env=env, workers=workers, worker_class=worker_class,
            threads=threads, extra=("--backlog", "2048"), **extra,
        )  # fmt: skip

    servers: dict[str, Server] = {}
    try:
        servers["bare"] = serve(
            "bench.bare.wsgi:application",
            django_env(DB_URL, settings="bench.bare.settings", DB_CONN_MAX_AGE="600"),
        )
        if args.before:
            env = django_env(DB_URL, DB_CONN_MAX_AGE="600", PYTHONPATH=str(args.before))
            servers["before"] = serve("leaseboard.wsgi:application", env, args.before)
        servers["api"] = serve("leaseboard.wsgi:application", api_env)
        for spec in args.variant:
            spec, _, gunicorn = spec.partition("@")
            name, _, pairs = spec.partition(":")
            over = dict(kv.split("=", 1) for kv in pairs.split(",") if kv)
            env = {**api_env, **over}
            servers[name] = serve("leaseboard.wsgi:application", env, gunicorn=gunicorn)
        results, cpu = rounds(args, paths, servers, ctx, leases, free)
    finally:
        for server in servers.values():
            server.stop()
    summary(paths, servers, results, cpu)
    return 0


def bulk_leases(executor, n: int) -> list[str]:  # type: ignore[no-untyped-def]
    """n leases at epoch 1 on the first n items, inserted in bulk (no grant events: the
    renew and effect paths read none)."""
    from leaseboard.core.clock import db_now_ms
    from leaseboard.core.models import Lease, WorkItem

    items = list(WorkItem.objects.filter(queue__name="bench").order_by("id")[:n])
    WorkItem.objects.filter(id__in=[i.id for i in items]).update(epoch=1)
    now, hour = db_now_ms(), 3_600_000
    made = Lease.objects.bulk_create(
        [
            Lease(
                work_item=item, holder=executor, epoch=1, state=Lease.State.ACTIVE,
                grant_kind=Lease.GrantKind.ACQUIRE, granted_at_ms=now, renewed_at_ms=now,
                jeopardy_at_ms=now + 50 * 60_000, expires_at_ms=now + hour,
                max_expires_at_ms=now + 24 * hour, due_at_ms=now + 50 * 60_000,
                ttl_ms=hour, renew_after_ms=60_000, jeopardy_after_ms=50 * 60_000,
                lock_delay_ms=0,
            )
            for item in items
        ],
        batch_size=2000,
    )  # fmt: skip
    return [str(lease.id) for lease in made]


def rounds(args, paths, servers, ctx, leases, free):  # type: ignore[no-untyped-def]
    token, holder = ctx["token"], ctx["executor_id"]
    results: dict[tuple[str, str], list[tuple[Load, Load]]] = {}
    cpu: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for name, server in servers.items():  # warm every worker
        if name != "bare":
            wrk(server.url, leases[:100], run_all.RENEW, conns=4, threads=2, seconds=1,
                token=token)  # fmt: skip
    for r in range(args.rounds):
        say(f"round {r + 1}/{args.rounds}, load average {os.getloadavg()[0]:.2f}")
        for path in paths:
            bare: Load | None = None
            for name, server in servers.items():
                kind = "bare" if name == "bare" else "api"
                if (path, kind) == ("effect", "api"):
                    body = EFFECT % f"{name}{r}"
                else:
                    body = BODIES[(path, kind)]
                if path == "renew":
                    body = body % holder if kind == "bare" else body
                    items = leases
                elif path == "acquire" and kind == "api":
                    items, free[:] = free[:SLICE], free[SLICE:]
                elif path == "acquire" or (path, kind) == ("effect", "bare"):
                    items = [f"bench-{i}" for i in range(1, 8000)]
                else:
                    items = leases
                run_all.vacuum()
                web0, pg0 = cpu_seconds(server), pg_cpu_seconds()
                load = wrk(server.url, items, body, conns=args.conns, threads=2,
                           seconds=args.seconds, token=token)  # fmt: skip
                n = max(1.0, load.rate * args.seconds)
                per = ((cpu_seconds(server) - web0) / n * 1e6, (pg_cpu_seconds() - pg0) / n * 1e6)
                cpu.setdefault((path, name), []).append(per)
                if kind == "bare":
                    bare = load
                assert bare is not None
                results.setdefault((path, name), []).append((load, bare))
                say(
                    f"  {path:8} {name:8} {load.rate:7.0f}/s  p99 {load.p99_ms:6.1f} ms"
                    f"  ÷ bare {load.rate / bare.rate:.2f}"
                    + f"  CPU µs/req web {per[0]:,.0f} pg {per[1]:,.0f}"
                    + (f"  {load.failed} failed" if load.failed else "")
                )
    return results, cpu


def cpu_seconds(server: Server) -> float:
    """User + system CPU seconds of a gunicorn server's processes so far."""
    try:
        root = psutil.Process(server.proc.pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    return sum(_cpu(p) for p in procs)


def pg_cpu_seconds() -> float:
    """CPU seconds of the PostgreSQL backends connected to the bench database (their
    process titles name it): the servers keep their connections (CONN_MAX_AGE), and one
    server is loaded at a time, so a measurement's difference is that server's."""
    total = 0.0
    for p in psutil.process_iter(["cmdline"]):
        title = " ".join(p.info["cmdline"] or [])
        if title.startswith("postgres: ") and f" {DB_NAME} " in title:
            total += _cpu(p)
    return total


def _cpu(p: psutil.Process) -> float:
    try:
        t = p.cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return t.user + t.system


def summary(paths, servers, results, cpu) -> None:  # type: ignore[no-untyped-def]
    print(f"\nmedians over the rounds; load average now {os.getloadavg()[0]:.2f}\n")
    print(
        "| path | server | req/s | p99 ms | ÷ bare (median of rounds) | failed "
        "| web CPU µs/req | PostgreSQL CPU µs/req |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for path in paths:
        for name in servers:
            got = results.get((path, name), [])
            if not got:
                continue
            rate = statistics.median(a.rate for a, _ in got)
            p99 = statistics.median(a.p99_ms for a, _ in got)
            ratio = statistics.median(a.rate / b.rate for a, b in got)
            failed = sum(a.failed for a, _ in got)
            spent = cpu[(path, name)]  # measured beside every rate
            web = statistics.median(c[0] for c in spent)
            pg = statistics.median(c[1] for c in spent)
            print(
                f"| {path} | {name} | {rate:,.0f} | {p99:.1f} | {ratio:.2f} | {failed} "
                f"| {web:,.0f} | {pg:,.0f} |"
            )
    print(time.strftime("\n%Y-%m-%d %H:%M UTC", time.gmtime()))


if __name__ == "__main__":
    sys.exit(main())
