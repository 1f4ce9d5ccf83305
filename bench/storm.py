"""`make storm`: an expiry storm. Half the fleet dies in the same second (issue #32 item 2).

On a PostgreSQL and a Redis of its own (bench/servers.py: initdb into a temporary folder,
own ports; never the machine's shared servers), with `--web` gunicorn nodes (gthread),
`--workers` Celery workers (default 2) and one Celery beat as the product runs them
(sweeps every second), the sampled pages on the agents' node or, with `--pages-web N`, on
a pool of N workers of their own, and a loopback webhook on the queue that counts alert
deliveries:

1. seed `--leases` leases (default 100,000) through the product's grant
   (bench/storm_seed.py): half held by as many distinct agents, half by `--renewers`
   survivor agents that keep renewing them in SDK batches (bench/storm_agents.py);
2. the storm: every lease of the dying half gets its last renewal within the second
   before T (`--spread-ms`; the columns a renew writes, in one statement, with the storm's
   `--ttl-ms`), then nobody renews them: all fall into jeopardy and expire within a second;
3. measure, while a sampler loads the live page, the alerts page and the badge at their
   poll cadences for `--operators` people (open loop, bench/storm.py Sampler): the
   time from T + ttl until every dead lease is expired and has its expiry alert; the
   alert rows and the incidents the alerts page shows; the alert deliveries sent; the
   pages' p50/p95; the survivors' batch renew p50/p99 during the storm; errors.

Bounded: `--timeout-s` after T + ttl it stops and reports what it has. Loopback only;
everything it started is stopped and its folders removed (`--keep` keeps the logs).

    .venv/bin/python bench/storm.py [--leases 100000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import PY, ROOT, django_env, migrate, sayer, spawn, start_gunicorn, stop_group
from bench.faults_fleet import Hook
from bench.servers import OwnPostgres, OwnRedis, pg_statements_reset, pg_top_statements

say = sayer("storm")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


class Sampler(threading.Thread):
    """Loads each page at its own poll cadence (the htmx `every` of its template: the live
    page every 2 s, the alerts page and the badge every 5 s) for `operators` people
    watching, and records latencies. Open loop: a load is due on its schedule whatever the
    last one took, so a faster page is not loaded more often (a closed loop did that, and
    the extra loads were load of their own on the storm being measured). A load that falls
    behind its schedule starts at once; loads are one at a time, as one browser's are."""

    PAGES = {"live": "/", "alerts": "/alerts/", "badge": "/alerts/badge"}
    EVERY_S = {"live": 2.0, "alerts": 5.0, "badge": 5.0}

    def __init__(self, url: str, cookie: dict[str, str], operators: int) -> None:
        super().__init__(daemon=True)
        import httpx

        self.client = httpx.Client(
            base_url=url, cookies={cookie["name"]: cookie["value"]}, timeout=30
        )
        self.stop = threading.Event()
        self.times: dict[str, list[tuple[float, float]]] = {name: [] for name in self.PAGES}
        self.status: Counter[str] = Counter()
        self.last_alerts_html = ""
        self.operators = max(1, operators)

    def run(self) -> None:
        began = time.monotonic()
        # Each operator's loads of a page are spread across its period, as people who
        # opened the page at different moments.
        due = sorted(
            (began + self.EVERY_S[name] * k / self.operators, name)
            for name in self.PAGES
            for k in range(self.operators)
        )
        while not self.stop.is_set():
            at, name = due.pop(0)
            if self.stop.wait(max(0.0, at - time.monotonic())):
                break
            self.load(name)
            due.append((at + self.EVERY_S[name], name))
            due.sort()

    def load(self, name: str) -> None:
        began = time.perf_counter()
        try:
            response = self.client.get(self.PAGES[name])
        except Exception as exc:
            self.status[f"{name}:{type(exc).__name__}"] += 1
            return
        self.status[f"{name}:{response.status_code}"] += 1
        if name == "alerts" and response.status_code == 200:
            self.last_alerts_html = response.text
        self.times[name].append((time.time(), (time.perf_counter() - began) * 1000))


class Storm:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.tmp = Path(tempfile.mkdtemp(prefix="lb-storm-"))
        # Sized for 100,000 leases (the fault tests' 32 MB would measure buffer eviction),
        # with pg_stat_statements to say where the database's time went during the storm.
        self.pg = OwnPostgres(
            conf="shared_buffers = 256MB\nshared_preload_libraries = 'pg_stat_statements'\n"
            + os.environ.get("STORM_PG_CONF", "").replace("\\n", "\n")
        )
        self.redis = OwnRedis()
        self.hook = Hook()
        self.procs: dict[str, subprocess.Popen] = {}
        self.figures: dict[str, Any] = {}
        self.pages_url = ""  # the pages' own pool (`--pages-web`), or "": the agents' node

    def env(self) -> dict[str, str]:
        return django_env(
            self.db_url,
            drop=("LEASEBOARD_TESTING", "REDIS_URL"),
            CELERY_BROKER_URL=self.redis.url(0),
            REDIS_URL=self.redis.url(1),
            LEASEBOARD_CELERY_QUEUE="lb-storm",
            LEASEBOARD_SWEEP_INTERVAL_S="1",
            LEASEBOARD_DATA_DIR=str(self.tmp / "data"),
            LEASEBOARD_WEBHOOK_ALLOW_NETWORKS="127.0.0.0/8,::1/128",
            DB_CONN_MAX_AGE="600",
            LOG_LEVEL="WARNING",
        )

    def db(self) -> Any:
        import psycopg

        return psycopg.connect(self.db_url, autocommit=True)

    def start(self) -> None:
        self.pg.start()
        self.redis.start()
        self.db_url = self.pg.create_database("lb")
        say(f"own PostgreSQL on :{self.pg.port}, own Redis on :{self.redis.port}; migrating")
        migrate(self.env())
        with self.db() as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        a = self.args
        say(f"seeding {a.leases:,} leases ({a.leases // 2:,} to die) through the grant")
        out = self.tmp / "seed.json"
        subprocess.run(
            [PY, str(ROOT / "bench" / "storm_seed.py"), "--leases", str(a.leases),
             "--renewers", str(a.renewers), "--hook", self.hook.url, "--out", str(out)],
            cwd=ROOT, env=self.env(), check=True, timeout=3600,
        )  # fmt: skip
        self.seed = json.loads(out.read_text())
        say(f"seeded in {self.seed['seed_s']} s")
        for i in range(a.web):
            server = start_gunicorn(
                "leaseboard.wsgi:application", env=self.env(), workers=a.web_workers,
                worker_class="gthread", threads=4, extra=("--timeout", "60"),
                log=self.tmp / f"web{i}.log", what=f"storm web{i}",
            )  # fmt: skip
            self.procs[f"web{i}"] = server.proc
            self.urls = [*getattr(self, "urls", []), server.url]
        if a.pages_web:  # the operators' pages on a pool of their own (docs/deployment.md)
            pages = start_gunicorn(
                "leaseboard.wsgi:application", env=self.env(), workers=a.pages_web,
                worker_class="gthread", threads=2, extra=("--timeout", "60"),
                log=self.tmp / "pages.log", what="storm pages",
            )  # fmt: skip
            self.procs["pages"] = pages.proc
            self.pages_url = pages.url
        celery = [PY, "-m", "celery", "-A", "leaseboard"]
        for i in range(a.workers):  # concurrent sweeps split a storm (FOR UPDATE SKIP LOCKED)
            self.procs[f"worker{i}"] = spawn(
                [*celery, "worker", "-P", "solo", "-n", f"storm{i}@%h", "--without-mingle",
                 "--without-gossip", "-l", "WARNING"],
                env=self.env(), log=self.tmp / f"worker{i}.log",
            )  # fmt: skip
        self.procs["beat"] = spawn(
            [*celery, "beat", "-l", "WARNING", "-s", str(self.tmp / "beat-schedule")],
            env=self.env(), log=self.tmp / "beat.log",
        )  # fmt: skip

    def start_renewers(self) -> None:
        self.stop_file = self.tmp / "stop"
        for i, (token, held) in enumerate(zip(self.seed["tokens"], self.seed["held"], strict=True)):
            leases = self.tmp / f"held{i}.json"
            leases.write_text(json.dumps(held))
            self.procs[f"renewer{i}"] = spawn(
                [PY, str(ROOT / "bench" / "storm_agents.py"),
                 "--url", self.urls[i % len(self.urls)], "--token", token,
                 "--leases", str(leases), "--out", str(self.tmp / f"renewer{i}.json"),
                 "--stop-file", str(self.stop_file), "--ready-file", str(self.tmp / f"ready{i}"),
                 "--every-s", str(self.args.renew_every_s)],
                env=self.env(), log=self.tmp / f"renewer{i}.log",
            )  # fmt: skip
        deadline = time.monotonic() + 600
        while not all((self.tmp / f"ready{i}").exists() for i in range(self.args.renewers)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"renewers did not renew in 10 minutes (logs: {self.tmp})")
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited early (logs: {self.tmp})")
            time.sleep(0.5)

    def wait_sweeping(self) -> None:
        """Until beat and the worker have completed two sweeps (a worker boots slowly on
        a busy machine; a storm before it would measure its boot)."""
        deadline = time.monotonic() + 300
        seen: set[int] = set()
        with self.db() as conn:
            while len(seen) < 2:
                row = conn.execute(
                    "SELECT last_completed_at_ms FROM sweeps_sweepstate WHERE id = 1"
                ).fetchone()
                if row and row[0]:
                    seen.add(int(row[0]))
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no sweep completed in 5 minutes (logs: {self.tmp})")
                time.sleep(0.2)

    def storm(self) -> None:
        """Every dying lease renewed last within the `--spread-ms` before T (as a renew
        writes it: renewed, jeopardy, expiry and due times from the lease's timing), then
        abandoned: they die in the same second, not at the same millisecond."""
        ttl = self.args.ttl_ms
        jeopardy_after = ttl * 2 // 3
        with self.db() as conn:
            pg_statements_reset(conn.cursor())
            t = conn.execute(
                "UPDATE core_lease l SET ttl_ms = %(ttl)s, renew_after_ms = %(renew)s, "
                "jeopardy_after_ms = %(jeop)s, renewed_at_ms = s.at, "
                "jeopardy_at_ms = s.at + %(jeop)s, expires_at_ms = s.at + %(ttl)s, "
                "due_at_ms = s.at + %(jeop)s "
                "FROM (SELECT l2.id, n.now, n.now - floor(random() * %(spread)s)::bigint AS at "
                "FROM core_lease l2 JOIN core_executor e ON e.id = l2.holder_id, "
                "(SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now) n "
                "WHERE e.name LIKE 'storm-agent-%%' AND l2.state = 'active') s "
                "WHERE l.id = s.id RETURNING s.now",
                {"ttl": ttl, "renew": ttl // 3, "jeop": jeopardy_after,
                 "spread": self.args.spread_ms},
            ).fetchall()  # fmt: skip
        self.t_ms = int(t[0][0])
        self.expire_at_ms = self.t_ms + ttl
        say(f"{len(t):,} leases renewed for the last time; they expire in {ttl} ms")

    def watch(self) -> None:
        """Poll until every dying lease is expired and alerted, or the timeout."""
        dying = self.seed["dying"]
        deadline = time.time() + self.args.ttl_ms / 1000 + self.args.timeout_s
        done_ms: int | None = None
        with self.db() as conn:
            while time.time() < deadline:
                # Only the dying half can expire (the survivors' leases last an hour): a
                # count without the executor join, twice a second, so the watch is not a
                # load of its own (the join every 0.25 s took 14 s of the database's time).
                expired, alerted, now = conn.execute(
                    "SELECT (SELECT count(*) FROM core_lease WHERE state = 'expired'), "
                    "(SELECT count(*) FROM core_alert WHERE kind = 'expired' AND "
                    "lease_id IS NOT NULL), "
                    "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
                ).fetchone()
                if expired >= dying and alerted >= dying:
                    done_ms = int(now)
                    break
                time.sleep(0.5)
            self.figures["expired"], self.figures["expiry_alerts"] = expired, alerted
        # From the last death (T + ttl) and from the first (`--spread-ms` earlier).
        self.figures["all_expired_and_alerted_after_s"] = (
            round((done_ms - self.expire_at_ms) / 1000, 2) if done_ms else None
        )
        self.figures["after_first_expiry_s"] = (
            round((done_ms - self.expire_at_ms + self.args.spread_ms) / 1000, 2)
            if done_ms
            else None
        )

    def measure(self, sampler: Sampler) -> None:
        with self.db() as conn:  # the deliveries the storm's alerts owe, sent or not
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                pending = conn.execute(
                    "SELECT count(*) FROM sweeps_notificationdelivery WHERE status = 'pending'"
                ).fetchone()[0]
                if not pending:
                    break
                time.sleep(0.25)
        self.figures["deliveries_pending_at_end"] = pending
        self.figures["deliveries_done_after_s"] = round(time.time() - self.expire_at_ms / 1000, 2)
        sampler.stop.set()
        sampler.join(40)
        self.stop_file.write_text("stop")
        for i in range(self.args.renewers):
            proc = self.procs[f"renewer{i}"]
            proc.wait(120)
        f = self.figures
        window = (self.t_ms / 1000, time.time())
        batches, renew_errors = [], Counter()
        for i in range(self.args.renewers):
            got = json.loads((self.tmp / f"renewer{i}.json").read_text())
            batches += [ms for at, ms in got["batches"] if window[0] <= at <= window[1]]
            renew_errors.update(got["errors"])
        f["renew_batches_in_storm"] = len(batches)
        f["renew_p50_ms"], f["renew_p99_ms"] = pct(batches, 0.5), pct(batches, 0.99)
        f["renew_errors"] = dict(renew_errors)
        for name, seen in sampler.times.items():
            during = [ms for at, ms in seen if at >= window[0]]
            f[f"{name}_page_loads"] = len(during)
            f[f"{name}_p50_ms"], f[f"{name}_p95_ms"] = pct(during, 0.5), pct(during, 0.95)
        f["page_status"] = dict(sampler.status)
        html = sampler.last_alerts_html
        f["alerts_page_rows"] = html.count("<tr") - html.count("<thead")
        f["alerts_page_kb"] = round(len(html.encode()) / 1024)
        with self.db() as conn:
            rows = conn.execute(
                "SELECT kind, count(*), count(*) FILTER (WHERE folded_into_id IS NULL) "
                "FROM core_alert GROUP BY kind ORDER BY kind"
            ).fetchall()
            f["alert_rows"] = {kind: n for kind, n, _ in rows}
            f["alert_incidents"] = {kind: top for kind, _, top in rows}
            f["deliveries"] = conn.execute(
                "SELECT count(*) FROM sweeps_notificationdelivery"
            ).fetchone()[0]
        f["webhook_posts"] = self.hook.posts
        f["top_statements"] = self.top_statements()
        f["load_average"] = os.getloadavg()

    def top_statements(self, n: int = 10) -> list[dict[str, Any]]:
        """Where the database's time went from T to now: the statements by total time."""
        with self.db() as conn:
            return pg_top_statements(conn.cursor(), n)

    def close(self) -> None:
        for proc in self.procs.values():
            stop_group(proc)
        self.hook.close()
        if self.args.keep and self.pg.log.exists():
            shutil.copy(self.pg.log, self.tmp / "postgres.log")
        self.pg.close()
        self.redis.close()
        if not self.args.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--leases", type=int, default=100_000)
    p.add_argument("--renewers", type=int, default=4, help="survivor processes (credentials)")
    p.add_argument("--web", type=int, default=1)
    p.add_argument("--web-workers", type=int, default=2)
    p.add_argument(
        "--pages-web", type=int, default=0,
        help="gunicorn workers of a web pool of its own for the sampled pages (0: the pages "
        "share the agents' web node)",
    )  # fmt: skip
    p.add_argument("--workers", type=int, default=2, help="Celery workers (solo pool each)")
    p.add_argument("--ttl-ms", type=int, default=6000, help="the dying leases' ttl")
    p.add_argument(
        "--spread-ms", type=int, default=1000,
        help="the dying leases' last renewals spread over this many ms before T (0: one instant)",
    )  # fmt: skip
    p.add_argument(
        "--renew-every-s", type=float, default=5.0,
        help="the survivors' renewal period (100,000 agents every 5 s is the issue's 20,000/s)",
    )  # fmt: skip
    p.add_argument(
        "--operators", type=int, default=4,
        help="people watching the pages at their poll cadences (live every 2 s, alerts and "
        "badge every 5 s): 4 load the live page twice a second",
    )  # fmt: skip
    p.add_argument("--timeout-s", type=float, default=120)
    p.add_argument("--json", default="")
    p.add_argument(
        "--keep", action="store_true",
        help="keep the logs folder (PostgreSQL's log too; STORM_PG_CONF adds postgresql.conf "
        "lines, e.g. auto_explain's, separated by \\n)",
    )  # fmt: skip
    args = p.parse_args(argv)
    run = Storm(args)
    try:
        run.start()
        run.start_renewers()
        run.wait_sweeping()
        say("survivors renewing; the pages are sampled; the other half dies now")
        sampler = Sampler(run.pages_url or run.urls[0], run.seed["session"], args.operators)
        sampler.start()
        run.storm()
        run.watch()
        run.measure(sampler)
    finally:
        run.close()
    f = run.figures
    f.update(leases=args.leases, dying=run.seed["dying"], ttl_ms=args.ttl_ms, web=args.web,
             web_workers=args.web_workers, pages_web=args.pages_web, renewers=args.renewers,
             workers=args.workers, renew_every_s=args.renew_every_s,
             spread_ms=args.spread_ms)  # fmt: skip
    print(json.dumps(f, indent=1, default=str))
    if args.json:
        Path(args.json).write_text(json.dumps(f, indent=1, default=str))
    ok = f["all_expired_and_alerted_after_s"] is not None
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
