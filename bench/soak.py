"""`make soak`: a fleet against several nodes, on PostgreSQL and Redis, for minutes.

- a PostgreSQL of its own, configured like production (`OWN_PG_CONF`: durable commits,
  autovacuum on, pg_stat_statements for the report's top statements); `--no-own-pg` uses
  the machine's (`--db`), whose autovacuum may be off;
- `--web` gunicorn instances (default 3, each `--web-workers` sync workers) behind a
  loopback HAProxy (Debian's `haproxy`, round robin, `/healthz` checks);
- `--workers` Celery workers (default 2) and one Celery beat (sweeps every second);
- `--agents` simulated agents (default 10,000) in `--procs` processes (bench/soak_agents.py):
  each agent holds one lease through the SDK's asyncio client, one credential per process,
  so each process renews all its leases in one batch request per tick; each process also
  proposes `--effects` effects per second and grants itself `--abandon` leases per second
  that it never renews, for the sweep to expire.

Reports renewals/s, batch renew p50/p99, effect p99, sweep lag (an abandoned lease's
expiry to its `expired` event: due → materialized) p50/p99, alert latency (an alert's due
time to its opening) p99, RSS of every process sampled every `--sample-s` seconds (first
sample after the warm-up vs the last: flat within 10%?), errors. Not part of the test
suite. Default 10,000 agents × 10 minutes; a machine with two cores bears about 2,000 × 3
minutes (docs/deployment.md). The fleet of issue #32 (100,000 agents, 3 web nodes, 2
workers, 10 minutes) is `make soak-100k`.

`SOAK_MEMPROBE=<dir>` in the environment: each agent process also samples where its memory
goes (bench/soak_memprobe.py; read it with bench/soak_memdiff.py <dir>).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import (
    PG,
    PY,
    django_env,
    free_port,
    migrate,
    recreate_database,
    sayer,
    setup_django,
    spawn,
    start_gunicorn,
    stop_group,
    wait_port,
)
from bench.servers import OwnPostgres, pg_statements_reset
from bench.soak_report import report, sample_rss

say = sayer("soak")
HAPROXY = """global
    maxconn 4000
    log stdout format raw local0 info
defaults
    mode http
    log global
    log-format "%Ts%ms %HM %HP %ST %s %TR %Tw %Tc %Tr %Ta"
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend leaseboard
    bind 127.0.0.1:{port}
    default_backend web
backend web
    balance roundrobin
{priority}    option httpchk
    http-check send meth GET uri /healthz ver HTTP/1.1 hdr Host 127.0.0.1
{servers}
"""

# Renewals first (docs/deployment.md, "Renewals first"): each server is given as many
# requests at once as it has sync workers, the rest wait at HAProxy, and a waiting renewal
# (one lease or a batch) is taken before any other request. Without it a warm-up's
# acquires fill every worker's backlog and the renewals wait behind them until leases lapse.
# abortonclose: a request whose client gave up while it waited (an SDK timeout) leaves the
# queue instead of being served to nobody; an acquire served that way granted a lease no
# one knew of, in the way of the agent's retry until its ttl ran out.
RENEW_FIRST = """    http-request set-priority-class int(-10) if { path_end /renew }
    timeout queue 10s
    option abortonclose
"""


# The soak's own PostgreSQL (OwnPostgres's scratch defaults turned back to production's:
# durable commits, full-page writes, autovacuum). The machines this project runs on have
# autovacuum off for their CI cluster: a soak there keeps every renewal's dead row version
# (1.16 million in core_lease after 10 minutes at 30,000 agents, 335 MB for 31,000 live
# rows), and the sweep and the batch renews walked them until every batch outlasted the
# statement timeout. A production PostgreSQL vacuums; so does this one.
OWN_PG_CONF = """shared_preload_libraries = 'pg_stat_statements'
fsync = on
synchronous_commit = on
full_page_writes = on
shared_buffers = 256MB
max_wal_size = 4GB
autovacuum = on
autovacuum_naptime = 10s
"""


# A gunicorn access line: method, path, status, microseconds in the worker, worker pid.
ACCESS_FORMAT = "%(m)s %(U)s %(s)s %(D)s %(p)s"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--agents", type=int, default=10_000)
    p.add_argument("--seconds", type=int, default=600)
    p.add_argument(
        "--procs", type=int, default=0, help="agent processes (0: 1 per 1,000, at most 10)"
    )
    p.add_argument(
        "--hold-concurrency", type=int, default=8, help="acquires in flight per process at start"
    )
    p.add_argument(
        "--acquire-rate",
        type=float,
        default=500,
        help="warm-up acquires started per second, all processes together (0: unpaced)",
    )
    p.add_argument("--web", type=int, default=3)
    p.add_argument("--web-workers", type=int, default=2)
    p.add_argument(
        "--renew-first",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="HAProxy queues requests per server and takes renewals first (default on)",
    )
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--effects", type=int, default=2, help="effects per second per process")
    p.add_argument("--abandon", type=int, default=1, help="abandoned leases/s per process")
    p.add_argument("--ttl-ms", type=int, default=15_000)
    p.add_argument("--sample-s", type=float, default=10.0)
    p.add_argument(
        "--own-pg",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a PostgreSQL of the soak's own, configured like production (OWN_PG_CONF: "
        "durable, autovacuum on); --no-own-pg: the machine's, database --db",
    )
    p.add_argument("--db", default=os.environ.get("SOAK_DB", "leaseboard_soak"))
    p.add_argument("--redis", default=os.environ.get("SOAK_REDIS_URL", "redis://127.0.0.1:6379/13"))
    p.add_argument("--json", default="", help="also write the figures here")
    args = p.parse_args(argv)
    # 100,000 agents are 10 processes of 10,000 (each one credential, one batch per tick),
    # not 100 processes a machine would spend its memory on.
    procs = args.procs or min(10, max(1, (args.agents + 999) // 1000))
    if not shutil.which("haproxy"):
        say("haproxy is not installed: apt-get install -y haproxy")
        return 1
    tmp = Path(tempfile.mkdtemp(prefix="lb-soak-"))
    own = OwnPostgres(conf=OWN_PG_CONF) if args.own_pg else None
    try:
        if own is not None:
            own.start()
            db_url = own.create_database("soak")
        else:
            db_url = f"{PG}/{args.db}"
            recreate_database(args.db)
        return soak(args, procs, tmp, db_url)
    finally:
        if own is not None:
            own.close()


def soak(args: argparse.Namespace, procs: int, tmp: Path, db_url: str) -> int:
    env = django_env(
        db_url,
        drop=("LEASEBOARD_TESTING", "REDIS_URL"),
        CELERY_BROKER_URL=args.redis,
        LEASEBOARD_CELERY_QUEUE=f"lb-soak-{os.getpid()}",
        LEASEBOARD_SWEEP_INTERVAL_S="1",
        LEASEBOARD_DATA_DIR=str(tmp / "data"),
        DB_CONN_MAX_AGE="600",
        LOG_LEVEL="ERROR",
    )
    where = "own PostgreSQL" if args.own_pg else f"database {args.db}"
    say(f"{where}; {args.agents} agents in {procs} processes for {args.seconds} s")
    migrate(env)
    setup_django(**env)
    from django.db import connection

    if args.own_pg:  # where the database's time goes while measuring (`top_statements`)
        with connection.cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    per, spare = args.agents // procs, args.abandon * (args.seconds + 5)
    tokens = seed(procs, per, spare, args.ttl_ms)

    groups: dict[str, object] = {}
    try:
        nodes = []
        for i in range(args.web):
            server = start_gunicorn(
                "leaseboard.wsgi:application", env=env, workers=args.web_workers,
                extra=("--backlog", "2048", "--timeout", "30", "--max-requests", "0",
                       "--access-logfile", str(tmp / f"web{i}.access"),
                       "--access-logformat", ACCESS_FORMAT),
                log=tmp / f"web{i}.log", what=f"web{i}",
            )  # fmt: skip
            groups[f"web{i}"] = server.proc
            nodes.append(server.port)
        port = free_port()
        limit = f" maxconn {args.web_workers}" if args.renew_first else ""
        servers = "\n".join(
            f"    server web{i} 127.0.0.1:{n} check inter 5s{limit}" for i, n in enumerate(nodes)
        )
        priority = RENEW_FIRST if args.renew_first else ""
        (tmp / "haproxy.cfg").write_text(
            HAPROXY.format(port=port, servers=servers, priority=priority)
        )
        groups["haproxy"] = spawn(
            ["haproxy", "-db", "-f", str(tmp / "haproxy.cfg")], log=tmp / "haproxy.log"
        )
        wait_port(port, "haproxy")
        url = f"http://127.0.0.1:{port}"
        celery = [PY, "-m", "celery", "-A", "leaseboard"]
        for i in range(args.workers):
            groups[f"worker{i}"] = spawn(
                [*celery, "worker", "-P", "solo", "-n", f"soak{i}@%h", "--without-mingle",
                 "--without-gossip", "-l", "WARNING"],
                env=env, log=tmp / f"worker{i}.log",
            )  # fmt: skip
        groups["beat"] = spawn(
            [*celery, "beat", "-l", "WARNING", "-s", str(tmp / "beat-schedule")],
            env=env, log=tmp / "beat.log",
        )  # fmt: skip
        start_file = tmp / "start"
        for i in range(procs):
            groups[f"agents{i}"] = spawn(
                [PY, str(Path(__file__).parent / "soak_agents.py"), "--url", url,
                 "--token", tokens[i], "--prefix", f"soak{i}",
                 "--out", str(tmp / f"agents{i}.json"),
                 "--start-file", str(start_file), "--agents", str(per),
                 "--seconds", str(args.seconds), "--effects", str(args.effects),
                 "--abandon", str(args.abandon), "--spare", str(spare),
                 "--hold-concurrency", str(args.hold_concurrency),
                 "--acquire-rate", str(args.acquire_rate / procs)],
                env=env, log=tmp / f"agents{i}.log",
            )  # fmt: skip
        say(f"{args.web} web nodes behind haproxy at {url}, {args.workers} workers, beat")
        wait_ready(tmp, procs, groups)
        say("every agent holds its lease: measuring")
        started_ms = db_clock()
        if args.own_pg:
            with connection.cursor() as cursor:
                pg_statements_reset(cursor)
        start_file.write_text("go")
        samples = sample_rss(groups, args.seconds, args.sample_s, tmp, procs)
        ended_ms = db_clock()
    finally:
        for proc in groups.values():
            stop_group(proc)  # type: ignore[arg-type]
    figures = report(args, procs, tmp, samples, started_ms, ended_ms)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    say(f"logs in {tmp}")
    return 0 if figures["errors_total"] == 0 else 2


def seed(procs: int, per: int, spare: int, ttl_ms: int) -> list[str]:
    """A queue with the soak's ttl, one agent credential per process, and every work item
    an agent process will hold or abandon (`soak<i>-<n>`, `soak<i>-x<n>`), admitted, made
    in bulk."""
    from leaseboard.core.clock import db_now_ms
    from leaseboard.core.models import Queue, WorkItem
    from leaseboard.core.services.executors import agent_create

    timing = {"ttl_ms": ttl_ms, "max_lifetime_ms": 24 * 3_600_000}
    queue = Queue.objects.create(name="soak", timing=timing)
    now = db_now_ms()
    keys = [f"soak{i}-{n}" for i in range(procs) for n in range(per)]
    keys += [f"soak{i}-x{n}" for i in range(procs) for n in range(spare)]
    WorkItem.objects.bulk_create(
        [
            WorkItem(key=k, queue=queue, admission="admitted", created_at_ms=now,
                     admitted_at_ms=now)
            for k in keys
        ],
        batch_size=2000,
    )  # fmt: skip
    return [
        agent_create(name=f"soak-agent-{i}", queues=["soak"], actor_name="bench")[1]
        for i in range(procs)
    ]


def db_clock() -> int:
    from leaseboard.core.clock import db_now_ms

    return db_now_ms()


def wait_ready(tmp: Path, procs: int, groups: dict[str, object]) -> None:
    deadline = time.time() + 1800
    while not all((tmp / f"agents{i}.json.ready").exists() for i in range(procs)):
        if time.time() > deadline:
            raise RuntimeError("agents did not get their leases in 30 minutes")
        for name, proc in groups.items():
            if proc.poll() is not None:  # type: ignore[attr-defined]
                raise RuntimeError(f"{name} exited early (logs in {tmp})")
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
