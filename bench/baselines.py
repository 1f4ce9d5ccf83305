"""The rows of `make bench` that are not Leaseboard over HTTP: pgbench running the API's own
renew statement (the physical limit for one row per statement), etcd keep-alives through its
HTTP gateway, and the recipient guards beside the raw statements they wrap. Each function
returns its rows and the figure the targets need."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from multiprocessing import Pool
from pathlib import Path

from bench.common import free_port, sayer, spawn, stop_group, wait_until
from bench.loadgen import wrk
from bench.report import Row, failed_note

say = sayer("bench")


def bench_pgbench(
    db_url: str, leases: list[str], holder: int, seconds: int
) -> tuple[list[Row], float | None]:
    if not shutil.which("pgbench"):
        say("pgbench not installed; skipping the physical-limit row")
        return [], None
    import psycopg

    from leaseboard.core.sql import lease_renew

    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS bench_lease_ids")
        conn.execute("CREATE TABLE bench_lease_ids (n int PRIMARY KEY, id uuid NOT NULL)")
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO bench_lease_ids VALUES (%s, %s)",
                [(i + 1, lid) for i, lid in enumerate(leases)],
            )
    sql = lease_renew("postgresql", 1).replace(
        "(%s::uuid, %s::bigint)",
        "((SELECT id FROM bench_lease_ids WHERE n = :n), 1::bigint)",
    )
    sql = sql.replace("l.holder_id = %s", f"l.holder_id = {holder}")
    with tempfile.NamedTemporaryFile("w", suffix=".sql", prefix="bench-renew-") as script:
        script.write(f"\\set n random(1, {len(leases)})\n{sql};\n")
        script.flush()
        out = subprocess.run(
            ["pgbench", "-h", "127.0.0.1", "-U", "postgres", "-n", "-M", "prepared", "-c", "16",
             "-j", "2", "-T", str(seconds), "-r", "-f", script.name, db_url.rsplit("/", 1)[1]],
            capture_output=True, text=True, timeout=seconds + 60,
        )  # fmt: skip
    m = re.search(r"tps = ([\d.]+)", out.stdout)
    lat = re.search(r"latency average = ([\d.]+) ms", out.stdout)
    if not m:
        say(f"pgbench failed: {out.stdout[-500:]} {out.stderr[-500:]}")
        return [], None
    tps = float(m.group(1))
    row = Row(
        "pgbench: same fenced UPDATE, 1 row", "16", tps, "renewals/s",
        note=f"avg latency {lat.group(1) if lat else '?'} ms; physical limit",
    )  # fmt: skip
    return [row], tps


def bench_etcd(seconds: int) -> tuple[list[Row], float | None]:
    etcd = shutil.which("etcd")
    what = "etcd lease keep-alive (HTTP gateway)"
    if not etcd:
        say("etcd not installed (Debian: apt-get install etcd-server); skipping the etcd ratio")
        return [Row(what, "16", None, "", note="etcd not installed")], None
    import httpx

    def healthy() -> bool:
        try:
            return httpx.get(f"{url}/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    client_port, peer_port = free_port(), free_port()
    url = f"http://127.0.0.1:{client_port}"
    with tempfile.TemporaryDirectory(prefix="bench-etcd-") as data:
        proc = spawn(
            [etcd, "--name", "bench", "--data-dir", str(Path(data) / "etcd"),
             "--listen-client-urls", url, "--advertise-client-urls", url,
             "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
             "--initial-cluster", f"bench=http://127.0.0.1:{peer_port}", "--log-level", "error"],
            log=Path("/dev/null"),
        )  # fmt: skip
        try:
            wait_until(healthy, "etcd", timeout=20, interval=0.3)
            ids = [
                httpx.post(f"{url}/v3/lease/grant", json={"TTL": 600}, timeout=5).json()["ID"]
                for _ in range(1000)
            ]
            body = (
                'return wrk.format("POST", "/v3/lease/keepalive", headers, '
                "'{\"ID\":\"' .. item .. '\"}')"
            )
            load = wrk(url, [str(i) for i in ids], body, conns=16, threads=2, seconds=seconds)
            version = subprocess.run([etcd, "--version"], capture_output=True, text=True).stdout
        finally:
            stop_group(proc)
    row = Row(
        what, "16", load.rate, "renewals/s", load.p50_ms, load.p99_ms,
        f"etcd {version.split()[2]}{failed_note(load.failed)}",
    )  # fmt: skip
    return [row], load.rate


def _guard_worker(args: tuple[str, int, float, str, str]) -> int:
    """One process checking epochs for a few seconds; returns the number of checks."""
    kind, wid, seconds, db_url, redis_url = args
    import psycopg
    import redis

    from leaseboard_recipient.guard import PostgresEpochGuard, RedisEpochGuard, upsert_sql

    n, epoch = 0, 0
    keys = [f"bench-{wid}-{k}" for k in range(100)]
    end = time.monotonic() + seconds
    if kind == "pg-guard":
        guard = PostgresEpochGuard(db_url)
        while time.monotonic() < end:
            epoch += 1
            guard.check_and_advance(keys[n % 100], epoch)
            n += 1
        guard.close()
    elif kind == "pg-raw":
        sql = upsert_sql("bench_raw_guard")
        with psycopg.connect(db_url, autocommit=True) as conn, conn.cursor() as cur:
            while time.monotonic() < end:
                epoch += 1
                cur.execute(sql, (keys[n % 100], 0, epoch))
                cur.fetchone()
                n += 1
    elif kind == "redis-guard":
        guard_r = RedisEpochGuard(redis.Redis.from_url(redis_url), prefix="lb-bench:")
        while time.monotonic() < end:
            epoch += 1
            guard_r.check_and_advance(keys[n % 100], epoch)
            n += 1
    else:
        from leaseboard_recipient.guard import _LUA_CHECK_AND_ADVANCE

        client = redis.Redis.from_url(redis_url)
        sha = client.script_load(_LUA_CHECK_AND_ADVANCE)
        while time.monotonic() < end:
            epoch += 1
            client.evalsha(sha, 1, "lb-bench-raw:" + keys[n % 100], 0, epoch)  # generation, epoch
            n += 1
    return n


def bench_guards(db_url: str, redis_url: str, seconds: int) -> list[Row]:
    import psycopg
    import redis

    from leaseboard_recipient.guard import PostgresEpochGuard, schema_sql

    PostgresEpochGuard(db_url).ensure_schema()
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(schema_sql("bench_raw_guard"))
    try:
        redis.Redis.from_url(redis_url).ping()
        kinds = ["pg-guard", "pg-raw", "redis-guard", "redis-raw"]
    except redis.RedisError:
        say("Redis not reachable; skipping the Redis guard rows")
        kinds = ["pg-guard", "pg-raw"]
    procs = 4
    span = max(2.0, seconds / 2)
    labels = {
        "pg-guard": "recipient guard, PostgreSQL (PostgresEpochGuard)",
        "pg-raw": "raw INSERT … ON CONFLICT … WHERE (psycopg)",
        "redis-guard": "recipient guard, Redis (RedisEpochGuard)",
        "redis-raw": "raw EVALSHA of the same Lua (redis-py)",
    }
    rates = {}
    with Pool(procs) as pool:
        for kind in kinds:
            jobs = [(kind, w, span, db_url, redis_url) for w in range(procs)]
            rates[kind] = sum(pool.map(_guard_worker, jobs)) / span
    rows = []
    for kind in kinds:
        base = {"pg-guard": "pg-raw", "redis-guard": "redis-raw"}.get(kind)
        note = f"{rates[kind] / rates[base]:.2f}x raw" if base and base in rates else ""
        rows.append(Row(labels[kind], str(procs), rates[kind], "checks/s", note=note))
    client = redis.Redis.from_url(redis_url)
    for pattern in ("lb-bench:*", "lb-bench-raw:*"):
        keys = list(client.scan_iter(pattern, count=1000))
        if keys:
            client.delete(*keys)
    return rows
