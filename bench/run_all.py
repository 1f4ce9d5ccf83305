"""`make bench`: one bounded, loopback-only run that prints one table measured now.

API renewals (single and batch, several concurrencies) under gunicorn beside a raw-SQL
Django view, pgbench running the same fenced UPDATE, and etcd keep-alives (when etcd is
installed); acquire and effect authorizations; recipient-guard checks on PostgreSQL and
Redis beside the raw statement; then bench_sweep.py / bench_dashboard.py when present.
Load comes from `wrk` (apt-get install wrk). Results also go to docs/benchmarks.md.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PY = sys.executable
SECONDS = int(os.environ.get("BENCH_SECONDS", "6"))
DB_NAME = os.environ.get("BENCH_DB", "leaseboard_bench")
PG = "postgres://postgres@127.0.0.1:5432"
DB_URL = f"{PG}/{DB_NAME}"
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
WORKERS = int(os.environ.get("BENCH_GUNICORN_WORKERS", "2"))
TMP = Path(tempfile.mkdtemp(prefix="leaseboard-bench-"))
N_ITEMS = 16_000
BATCH = 1000


def say(msg: str) -> None:
    print(f"[bench] {msg}", flush=True)


@dataclass
class Row:
    what: str
    conc: str
    rate: float | None
    unit: str
    p50_ms: float | None = None
    p99_ms: float | None = None
    note: str = ""


ROWS: list[Row] = []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def django_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=DB_URL,
        DJANGO_SETTINGS_MODULE="bench.settings_bench",
        DEBUG="false",
        DB_CONN_MAX_AGE="600",
        PYTHONPATH=str(ROOT),
        LEASEBOARD_RATE_LIMIT_ENABLED="false",  # wrk's load is one token from one address
    )
    env.pop("LEASEBOARD_TESTING", None)
    return env


# --- set-up ------------------------------------------------------------------------------


def create_database() -> None:
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DB_NAME}"')
    subprocess.run(
        [PY, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=django_env(),
        check=True,
    )


def setup_django() -> None:
    os.environ.update(django_env())
    import django

    django.setup()


def seed() -> dict:
    """One agent, a long-ttl queue and N admitted work items (bulk insert, not the API)."""
    from django.db import connection

    from leaseboard.core.clock import db_now_ms
    from leaseboard.core.models import Queue, WorkItem
    from leaseboard.core.services.executors import agent_create

    executor, token = agent_create(name="bench-agent")
    timing = {
        "ttl_ms": 3_600_000,
        "renew_after_ms": 60_000,
        "jeopardy_after_ms": 3_000_000,
        "max_lifetime_ms": 86_400_000,
    }
    queue = Queue.objects.create(name="bench", timing=timing)
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
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # fresh tables: give the planner row counts before load
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


# --- processes ---------------------------------------------------------------------------


class Gunicorn:
    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [
            PY, "-m", "gunicorn", "leaseboard.wsgi:application",
            "--workers", str(WORKERS), "--worker-class", "sync",
            "--bind", f"127.0.0.1:{self.port}", "--backlog", "2048",
            "--log-level", "warning",
        ]  # fmt: skip
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=django_env(), start_new_session=True)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), 0.5):
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("gunicorn did not start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)


LUA_TEMPLATE = """
local items = {%(items)s}
local headers = {["Content-Type"] = "application/json", ["Authorization"] = "Bearer %(token)s"}
local counter = 0
local threads = {}
function setup(thread)
  thread:set("tid", counter)
  counter = counter + 1
end
function init(args)
  n = tonumber(tid) * %(stride)d
end
function request()
  n = n + 1
  local item = items[(n %% #items) + 1]
  %(body)s
end
function done(summary, latency, requests)
  io.write(string.format("RESULT %%d %%d %%.3f %%.3f %%d %%d\\n", summary.requests,
    summary.duration, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.status, summary.errors.connect + summary.errors.read
    + summary.errors.write + summary.errors.timeout))
end
"""


def wrk(
    url: str, items: list[str], body_lua: str, *, conns: int, threads: int, token: str = ""
) -> tuple[float, float, float, int]:
    """Run wrk; returns (requests/s, p50 ms, p99 ms, failed requests)."""
    script = TMP / f"wrk-{time.monotonic_ns()}.lua"
    script.write_text(
        LUA_TEMPLATE
        % {
            "items": ",".join(json.dumps(i) for i in items),
            "token": token,
            "stride": max(1, len(items) // max(1, threads)),
            "body": body_lua,
        }
    )
    out = subprocess.run(
        ["wrk", "-t", str(threads), "-c", str(conns), "-d", f"{SECONDS}s", "--timeout", "5s",
         "-s", str(script), url],
        capture_output=True, text=True, timeout=SECONDS + 60,
    ).stdout  # fmt: skip
    m = re.search(r"RESULT (\d+) (\d+) ([\d.]+) ([\d.]+) (\d+) (\d+)", out)
    if not m:
        raise RuntimeError(f"wrk printed no result:\n{out}")
    n, dur_us, p50, p99, bad_status, bad_io = m.groups()
    return int(n) / (int(dur_us) / 1e6), float(p50), float(p99), int(bad_status) + int(bad_io)


def bench_http(gun: Gunicorn, ctx: dict) -> dict:
    token, holder = ctx["token"], ctx["executor_id"]
    results: dict = {}

    # Acquire: every request takes a fresh admitted work item.
    keys = [f"bench-{i}" for i in range(1, N_ITEMS)]
    # The first grant on a fresh database creates the fencing key; keep it out of the figure.
    _post(gun.url + "/api/v1/work-items/bench-0/lease", token)
    acquire = 'return wrk.format("POST", "/api/v1/work-items/" .. item .. "/lease", headers, "{}")'
    rate, p50, p99, bad = wrk(gun.url, keys, acquire, conns=16, threads=2, token=token)
    ROWS.append(Row("acquire via API (grants)", "16", rate, "grants/s", p50, p99, _bad(bad)))
    results["acquire"] = rate

    leases = top_up_leases(ctx["executor"], 6000)
    single = (
        'return wrk.format("POST", "/api/v1/leases/" .. item .. "/renew", headers, \'{"epoch":1}\')'
    )
    raw = (
        f'return wrk.format("POST", "/bench/raw-renew/" .. item .. "?h={holder}", headers, '
        "'{\"epoch\":1}')"
    )
    wrk(gun.url, leases[:100], single, conns=4, threads=2, token=token)  # warm both workers
    for conns in (1, 4, 16):
        threads = 1 if conns == 1 else 2
        r_api = wrk(gun.url, leases, single, conns=conns, threads=threads, token=token)
        r_raw = wrk(gun.url, leases, raw, conns=conns, threads=threads, token=token)
        results[f"single-{conns}"] = r_api
        results[f"raw-{conns}"] = r_raw
        ratio = r_api[0] / r_raw[0]
        ROWS.append(
            Row("renew, single, API", str(conns), r_api[0], "renewals/s", r_api[1], r_api[2],
                f"{ratio:.2f}x raw view{_bad(r_api[3])}")
        )  # fmt: skip
        ROWS.append(
            Row("renew, raw-SQL Django view", str(conns), r_raw[0], "renewals/s", r_raw[1],
                r_raw[2], _bad(r_raw[3]))
        )  # fmt: skip

    # Batch: each connection renews its own 1000 leases per request.
    bodies = []
    for b in range(len(leases) // BATCH):
        chunk = leases[b * BATCH : (b + 1) * BATCH]
        bodies.append(json.dumps({"leases": [{"lease_id": i, "epoch": 1} for i in chunk]}))
    batch = 'return wrk.format("POST", "/api/v1/leases/renew", headers, item)'
    for conns in (1, 2, 4):
        rate, p50, p99, bad = wrk(
            gun.url, bodies[:conns], batch, conns=conns, threads=conns, token=token
        )
        results[f"batch-{conns}"] = rate * BATCH
        ROWS.append(
            Row(f"renew, batch of {BATCH}, API", str(conns), rate * BATCH, "renewals/s", p50, p99,
                f"{rate:.0f} req/s{_bad(bad)}")
        )  # fmt: skip

    effect = (
        'return wrk.format("POST", "/api/v1/effects", headers, string.format('
        '\'{"lease_id":"%s","epoch":1,"kind":"bench.effect","target":"t",'
        '"idempotency_key":"k-%d-%d"}\', item, tid, n))'
    )
    rate, p50, p99, bad = wrk(gun.url, leases, effect, conns=16, threads=2, token=token)
    ROWS.append(Row("effect authorization via API", "16", rate, "effects/s", p50, p99, _bad(bad)))
    results["effects"] = rate
    return results


def _post(url: str, token: str) -> None:
    import httpx

    httpx.post(url, json={}, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def _bad(n: int) -> str:
    return f"; {n} failed" if n else ""


def bench_pgbench(leases: list[str], holder: int) -> float | None:
    if not shutil.which("pgbench"):
        say("pgbench not installed; skipping the physical-limit row")
        return None
    import psycopg

    from leaseboard.core.services.leases import _renew_sql

    with psycopg.connect(DB_URL, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS bench_lease_ids")
        conn.execute("CREATE TABLE bench_lease_ids (n int PRIMARY KEY, id uuid NOT NULL)")
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO bench_lease_ids VALUES (%s, %s)",
                [(i + 1, lid) for i, lid in enumerate(leases)],
            )
    sql = _renew_sql("postgresql", 1).replace(
        "(%s::uuid, %s::bigint)",
        "((SELECT id FROM bench_lease_ids WHERE n = :n), 1::bigint)",
    )
    sql = sql.replace("l.holder_id = %s", f"l.holder_id = {holder}")
    script = TMP / "renew.sql"
    script.write_text(f"\\set n random(1, {len(leases)})\n{sql};\n")
    out = subprocess.run(
        ["pgbench", "-h", "127.0.0.1", "-U", "postgres", "-n", "-M", "prepared", "-c", "16",
         "-j", "2", "-T", str(SECONDS), "-r", "-f", str(script), DB_NAME],
        capture_output=True, text=True, timeout=SECONDS + 60,
    )  # fmt: skip
    m = re.search(r"tps = ([\d.]+)", out.stdout)
    lat = re.search(r"latency average = ([\d.]+) ms", out.stdout)
    if not m:
        say(f"pgbench failed: {out.stdout[-500:]} {out.stderr[-500:]}")
        return None
    tps = float(m.group(1))
    ROWS.append(
        Row("pgbench: same fenced UPDATE, 1 row", "16", tps, "renewals/s",
            note=f"avg latency {lat.group(1) if lat else '?'} ms; physical limit")
    )  # fmt: skip
    return tps


def bench_etcd() -> float | None:
    etcd = shutil.which("etcd")
    if not etcd:
        say("etcd not installed (Debian: apt-get install etcd-server); skipping the etcd ratio")
        ROWS.append(
            Row("etcd lease keep-alive (HTTP gateway)", "16", None, "", note="etcd not installed")
        )
        return None
    import httpx

    client_port, peer_port = free_port(), free_port()
    url = f"http://127.0.0.1:{client_port}"
    proc = subprocess.Popen(
        [etcd, "--name", "bench", "--data-dir", str(TMP / "etcd"),
         "--listen-client-urls", url, "--advertise-client-urls", url,
         "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
         "--initial-cluster", f"bench=http://127.0.0.1:{peer_port}", "--log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.time() + 20
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                raise RuntimeError("etcd did not start")
            time.sleep(0.3)
        ids = [
            httpx.post(f"{url}/v3/lease/grant", json={"TTL": 600}, timeout=5).json()["ID"]
            for _ in range(1000)
        ]
        body = (
            'return wrk.format("POST", "/v3/lease/keepalive", headers, '
            "'{\"ID\":\"' .. item .. '\"}')"
        )
        rate, p50, p99, bad = wrk(url, [str(i) for i in ids], body, conns=16, threads=2)
        version = subprocess.run([etcd, "--version"], capture_output=True, text=True).stdout
        ROWS.append(
            Row("etcd lease keep-alive (HTTP gateway)", "16", rate, "renewals/s", p50, p99,
                f"etcd {version.split()[2]}{_bad(bad)}")
        )  # fmt: skip
        return rate
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)


def _guard_worker(args: tuple[str, int, float]) -> int:
    """One process checking epochs for a few seconds; returns the number of checks."""
    kind, wid, seconds = args
    import psycopg
    import redis

    from leaseboard.recipient.guard import PostgresEpochGuard, RedisEpochGuard, _upsert_sql

    n, epoch = 0, 0
    keys = [f"bench-{wid}-{k}" for k in range(100)]
    end = time.monotonic() + seconds
    if kind == "pg-guard":
        guard = PostgresEpochGuard(DB_URL)
        while time.monotonic() < end:
            epoch += 1
            guard.check_and_advance(keys[n % 100], epoch)
            n += 1
        guard.close()
    elif kind == "pg-raw":
        sql = _upsert_sql("bench_raw_guard")
        with psycopg.connect(DB_URL, autocommit=True) as conn, conn.cursor() as cur:
            while time.monotonic() < end:
                epoch += 1
                cur.execute(sql, (keys[n % 100], epoch))
                cur.fetchone()
                n += 1
    elif kind == "redis-guard":
        guard_r = RedisEpochGuard(redis.Redis.from_url(REDIS_URL), prefix="lb-bench:")
        while time.monotonic() < end:
            epoch += 1
            guard_r.check_and_advance(keys[n % 100], epoch)
            n += 1
    else:
        from leaseboard.recipient.guard import _LUA_CHECK_AND_ADVANCE

        client = redis.Redis.from_url(REDIS_URL)
        sha = client.script_load(_LUA_CHECK_AND_ADVANCE)
        while time.monotonic() < end:
            epoch += 1
            client.evalsha(sha, 1, "lb-bench-raw:" + keys[n % 100], epoch)
            n += 1
    return n


def bench_guards() -> None:
    import psycopg
    import redis

    from leaseboard.recipient.guard import PostgresEpochGuard, schema_sql

    PostgresEpochGuard(DB_URL).ensure_schema()
    with psycopg.connect(DB_URL, autocommit=True) as conn:
        conn.execute(schema_sql("bench_raw_guard"))
    try:
        redis.Redis.from_url(REDIS_URL).ping()
        kinds = ["pg-guard", "pg-raw", "redis-guard", "redis-raw"]
    except redis.RedisError:
        say("Redis not reachable; skipping the Redis guard rows")
        kinds = ["pg-guard", "pg-raw"]
    procs = 4
    seconds = max(2.0, SECONDS / 2)
    labels = {
        "pg-guard": "recipient guard, PostgreSQL (PostgresEpochGuard)",
        "pg-raw": "raw INSERT … ON CONFLICT … WHERE (psycopg)",
        "redis-guard": "recipient guard, Redis (RedisEpochGuard)",
        "redis-raw": "raw EVALSHA of the same Lua (redis-py)",
    }
    rates = {}
    with Pool(procs) as pool:
        for kind in kinds:
            counts = pool.map(_guard_worker, [(kind, w, seconds) for w in range(procs)])
            rates[kind] = sum(counts) / seconds
    for kind in kinds:
        base = {"pg-guard": "pg-raw", "redis-guard": "redis-raw"}.get(kind)
        note = f"{rates[kind] / rates[base]:.2f}x raw" if base and base in rates else ""
        ROWS.append(Row(labels[kind], str(procs), rates[kind], "checks/s", note=note))
    client = redis.Redis.from_url(REDIS_URL)
    for pattern in ("lb-bench:*", "lb-bench-raw:*"):
        keys = list(client.scan_iter(pattern, count=1000))
        if keys:
            client.delete(*keys)


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


# --- report ------------------------------------------------------------------------------


def fmt(v: float | None, digits: int = 0) -> str:
    return "—" if v is None else f"{v:,.{digits}f}"


def table() -> str:
    head = (
        "| measurement | conc. | rate | unit | p50 ms | p99 ms | note |\n"
        "|---|---|---|---|---|---|---|"
    )
    body = [
        f"| {r.what} | {r.conc} | {fmt(r.rate)} | {r.unit} | {fmt(r.p50_ms, 1)} | "
        f"{fmt(r.p99_ms, 1)} | {r.note} |"
        for r in ROWS
    ]
    return "\n".join([head, *body])


def targets(res: dict, pg_tps: float | None, etcd: float | None) -> list[str]:
    out = []

    def check(name: str, ok: bool | None, figures: str) -> None:
        mark = "n/a" if ok is None else ("MET" if ok else "MISSED")
        out.append(f"- {mark}: {name} — {figures}")

    r16 = res["single-16"][0] / res["raw-16"][0]
    check("single renew ≥ 0.6 × raw-SQL view at 16 connections", r16 >= 0.6, f"{r16:.2f}")
    p99 = res["single-16"][2]
    check("single renew p99 < 25 ms at 16 connections", p99 < 25, f"{p99:.1f} ms")
    best_batch = max(v for k, v in res.items() if k.startswith("batch-"))
    if pg_tps:
        check(
            "batch renew ≥ pgbench single-row fenced UPDATE",
            best_batch >= pg_tps,
            f"{best_batch:,.0f} vs {pg_tps:,.0f} renewals/s ({best_batch / pg_tps:.2f}x)",
        )
    else:
        check("batch renew ≥ pgbench", None, "pgbench not installed")
    if etcd:
        check(
            "batch renew ≥ 2 × etcd keep-alives",
            best_batch >= 2 * etcd,
            f"{best_batch:,.0f} vs {etcd:,.0f} ({best_batch / etcd:.2f}x)",
        )
    else:
        check("batch renew ≥ 2 × etcd keep-alives", None, "etcd not installed")
    check("acquire ≥ 500 grants/s", res["acquire"] >= 500, f"{res['acquire']:,.0f} grants/s")
    return out


def machine() -> str:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import psycopg

    with psycopg.connect(DB_URL) as conn:
        pg = conn.execute("SHOW server_version").fetchone()[0]
    wrk_v = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.split("\n")[0]
    return (
        f"{os.cpu_count()} CPUs ({cpu}), {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, PostgreSQL {pg}, {wrk_v.strip()}, "
        f"gunicorn {WORKERS} sync workers, {SECONDS} s per measurement, "
        f"load average at the end {os.getloadavg()[0]:.1f} (other work on the machine skews "
        "absolute figures; compare ratios)"
    )


def main() -> int:
    started = time.time()
    if not shutil.which("wrk"):
        say("wrk is not installed: apt-get install -y wrk (the HTTP load generator)")
        return 1
    say(f"creating database {DB_NAME} and migrating")
    create_database()
    setup_django()
    ctx = seed()
    say(f"seeded {N_ITEMS} admitted work items; starting gunicorn")
    gun = Gunicorn()
    try:
        res = bench_http(gun, ctx)
    finally:
        gun.stop()
    leases = top_up_leases(ctx["executor"], 6000)
    say("pgbench")
    pg_tps = bench_pgbench(leases, ctx["executor_id"])
    say("etcd")
    etcd = bench_etcd()
    say("recipient guards")
    bench_guards()
    others = run_others()
    lines = targets(res, pg_tps, etcd)
    print()
    print(table())
    print()
    print("\n".join(lines))
    print(f"\n[bench] total {time.time() - started:.0f} s on {machine()}")
    write_doc(table(), lines, others)
    shutil.rmtree(TMP, ignore_errors=True)
    return 0


def write_doc(tbl: str, lines: list[str], others: list[str]) -> None:
    doc = ROOT / "docs" / "benchmarks.md"
    doc.parent.mkdir(exist_ok=True)
    text = doc.read_text() if doc.exists() else ""
    marker = "<!-- bench:results -->"
    results = (
        f"{marker}\n## Latest run ({time.strftime('%Y-%m-%d %H:%M')})\n\n"
        f"Machine: {machine()}.\n\n{tbl}\n\nTargets:\n\n" + "\n".join(lines) + "\n\n"
        "Other benches:\n\n" + "\n".join(others) + f"\n{marker}\n"
    )
    if marker in text:
        pre, _, rest = text.partition(marker)
        _, _, post = rest.partition(marker)
        text = pre + results + post.lstrip("\n")
    else:
        text = (text or "# Benchmarks\n\n") + "\n" + results
    doc.write_text(text)
    say(f"wrote {doc.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
