"""What `make soak` measures and prints (bench/soak.py runs it): the agents' own latencies
and counts, the sweep lag and alert latency from the alerts the sweep opened, the requests
over SLOW_MS at HAProxy and where they waited, the database's top statements while
measuring, and every process's RSS and CPU sampled while the agents run."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.servers import pg_top_statements

SLOW_MS = 1000


def slow_requests(tmp: Path, web: int) -> dict[str, object]:
    """Where the requests HAProxy saw take over SLOW_MS spent their time: waiting for a
    gunicorn worker to take them from its listen backlog (HAProxy's server time minus the
    worker's own) or in the worker. HAProxy logs every request (%Ta: the whole request,
    %Tr: server response); gunicorn logs the worker's time (%(D)s)."""
    seen: list[tuple[str, int, int]] = []  # path kind, total ms, server ms
    for line in (tmp / "haproxy.log").read_text(errors="replace").splitlines():
        parts = line.split()
        if len(parts) != 10 or not parts[-1].lstrip("-").isdigit():
            continue
        total, server = int(parts[-1]), int(parts[-2])
        seen.append((kind(parts[2]), total, server))
    worker_ms: list[tuple[str, float]] = []
    for i in range(web):
        log = tmp / f"web{i}.access"
        if log.exists():
            for line in log.read_text(errors="replace").splitlines():
                parts = line.split()
                if len(parts) == 5 and parts[3].isdigit():
                    worker_ms.append((kind(parts[1]), int(parts[3]) / 1000))
    slow = [s for s in seen if s[1] > SLOW_MS]
    slow_workers = [w for w in worker_ms if w[1] > SLOW_MS]
    return {
        "requests": len(seen),
        "slow": len(slow),
        "slow_by_kind": dict(Counter(k for k, _, _ in slow)),
        "slow_max_ms": max((t for _, t, _ in slow), default=0),
        "slow_in_worker": len(slow_workers),
        "worker_max_ms": round(max((t for _, t in worker_ms), default=0.0)),
        "worker_p99_ms": {
            k: round(pct([t for kk, t in worker_ms if kk == k], 0.99))
            for k in sorted({k for k, _ in worker_ms})
        },
    }


def kind(path: str) -> str:
    """A request's path with its ids taken out: /api/v1/leases/{id}/renew."""
    parts = path.split("?", 1)[0].split("/")
    for i, part in enumerate(parts):
        if part[:1].isdigit() or (i and parts[i - 1] == "leases" and len(part) == 36):
            parts[i] = "{id}"  # a number, or a lease's UUID (which may start with a letter)
        elif i and parts[i - 1] == "work-items":
            parts[i] = "{key}"
    return "/".join(parts)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def group_pids(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                pids.append(int(entry.name))
    return sorted(pids)


def top_statements(own_pg: bool) -> list[dict[str, Any]]:
    """Where the database's time went while measuring (the soak's own PostgreSQL only; the
    machine's may not load pg_stat_statements)."""
    if not own_pg:
        return []
    from django.db import connection

    with connection.cursor() as cursor:
        return pg_top_statements(cursor, 8, width=120)


def sample_rss(groups, seconds, every, tmp, procs):  # type: ignore[no-untyped-def]
    """RSS (kB) of every process of every group, every `every` seconds while agents run."""
    samples: list[tuple[float, dict[str, tuple[int, float]]]] = []
    t0 = time.time()
    while time.time() - t0 < seconds + 30:
        row = {}
        for name, proc in groups.items():
            for pid in group_pids(proc.pid):  # type: ignore[attr-defined]
                row[f"{name}/{pid}"] = (rss_kb(pid), cpu_s(pid))
        samples.append((time.time() - t0, row))
        if all((tmp / f"agents{i}.json").exists() for i in range(procs)):
            break
        time.sleep(every)
    return samples


def report(args, procs, tmp, samples, started_ms, ended_ms):  # type: ignore[no-untyped-def]
    from django.db import connection

    agents = [json.loads((tmp / f"agents{i}.json").read_text()) for i in range(procs)]
    renew_ms = [v for a in agents for v in a["renew_ms"]]
    effect_ms = [v for a in agents for v in a["effect_ms"]]
    errors: Counter[str] = Counter()
    for a in agents:
        errors.update(a["errors"])
    with connection.cursor() as cursor:
        # A lease's `expired` event is dated at its expiry (the logical time); the alert the
        # sweep opens in the same transaction is dated when the sweep ran (the database
        # clock): an expired alert's opened − due is the sweep's lag, due → materialized.
        cursor.execute(
            "SELECT kind, opened_at_ms - due_at_ms FROM core_alert WHERE due_at_ms "
            "BETWEEN %s AND %s AND kind IN ('expired', 'jeopardy')",
            [started_ms, ended_ms],
        )
        rows = cursor.fetchall()
        sweep_lag = [float(lag) for kind, lag in rows if kind == "expired"]
        alert_lag = [float(lag) for _, lag in rows]
    seconds = (ended_ms - started_ms) / 1000
    memory = rss_table(samples)
    figures = {
        "agents": args.agents, "procs": procs, "web": args.web, "web_workers": args.web_workers,
        "workers": args.workers, "seconds": round(seconds), "ttl_ms": args.ttl_ms,
        "renewals_per_s": sum(a["renewed"] for a in agents) / seconds,
        "batches_per_s": sum(a["batches"] for a in agents) / seconds,
        "renew_p50_ms": pct(renew_ms, 0.5), "renew_p99_ms": pct(renew_ms, 0.99),
        "effects_per_s": sum(a["effects"] for a in agents) / seconds,
        "effect_p50_ms": pct(effect_ms, 0.5), "effect_p99_ms": pct(effect_ms, 0.99),
        "abandoned": sum(a["abandoned"] for a in agents), "expired_alerts": len(sweep_lag),
        "sweep_lag_p50_ms": pct(sweep_lag, 0.5), "sweep_lag_p99_ms": pct(sweep_lag, 0.99),
        "alerts": len(alert_lag), "alert_latency_p99_ms": pct(alert_lag, 0.99),
        "warm_up_s": max((a.get("warm_up_s", 0.0) for a in agents), default=0.0),
        "held_at_start": sum(a.get("held_at_start", 0) for a in agents),
        "held_at_end": sum(a.get("held_at_end", 0) for a in agents),
        "errors": dict(errors),
        "errors_total": sum(n for k, n in errors.items() if not k.startswith("warm-up")),
        "warm_up_retries": sum(n for k, n in errors.items() if k.startswith("warm-up")),
        "load_average": os.getloadavg()[0], "memory": memory,
        "slow_requests": slow_requests(tmp, args.web),
        "top_statements": top_statements(args.own_pg),
    }  # fmt: skip
    print(
        f"\n{args.agents} agents, {procs} agent processes, {args.web} web nodes × "
        f"{args.web_workers} workers behind haproxy, {args.workers} Celery workers + beat, "
        f"{seconds:.0f} s, ttl {args.ttl_ms} ms, load average {figures['load_average']:.1f}\n"
    )
    print("| figure | value |\n|---|---|")
    for key in (
        "renewals_per_s", "batches_per_s", "renew_p50_ms", "renew_p99_ms", "effects_per_s",
        "effect_p50_ms", "effect_p99_ms", "abandoned", "expired_alerts", "sweep_lag_p50_ms",
        "sweep_lag_p99_ms", "alerts", "alert_latency_p99_ms", "warm_up_s", "held_at_start",
        "held_at_end", "warm_up_retries", "errors_total",
    ):  # fmt: skip
        value = figures[key]
        print(f"| {key} | {value:,.1f} |" if isinstance(value, float) else f"| {key} | {value} |")
    if errors:
        print(f"\nerrors: {dict(errors)}")
    print(f"\nrequests over {SLOW_MS} ms at HAProxy: {figures['slow_requests']}")
    if figures["top_statements"]:
        print("\n| statement (database time while measuring) | calls | total ms | mean ms |")
        print("|---|---:|---:|---:|")
        for row in figures["top_statements"]:
            print(
                f"| {row['query']} | {row['calls']} | {row['total_ms']:,.0f} | {row['mean_ms']} |"
            )
    print(
        "\n| process | RSS first MB | RSS mid MB | RSS last MB | change | second half | "
        "CPU (% of a core) |\n|---|---|---|---|---|---|---|"
    )
    for name, (first, mid, last, cpu, span) in memory.items():
        change = (last - first) / first * 100 if first else 0.0
        later = (last - mid) / mid * 100 if mid else 0.0
        busy = cpu / span * 100 if span else 0.0
        print(
            f"| {name} | {first / 1024:.0f} | {mid / 1024:.0f} | {last / 1024:.0f} | "
            f"{change:+.1f}% | {later:+.1f}% | {busy:.0f}% |"
        )
    return figures


def rss_table(samples) -> dict[str, tuple[int, int, int, float, float]]:  # type: ignore[no-untyped-def]
    """Per process: RSS at the first sample taken while measuring, at the middle one and at
    the last one (an agent process has exited by the final sample), and the CPU seconds
    between the first and the last over the seconds between them. The second half's change
    tells growth that stops (warming up) from growth that goes on (a leak)."""
    series: dict[str, list[tuple[float, int, float]]] = {}
    for at, row in samples:
        for name, (kb, cpu) in row.items():
            if kb:
                series.setdefault(name, []).append((at, kb, cpu))
    out: dict[str, tuple[int, int, int, float, float]] = {}
    for name, points in sorted(series.items()):
        (first_at, first_kb, first_cpu), (last_at, last_kb, last_cpu) = points[0], points[-1]
        mid_kb = points[len(points) // 2][1]
        out[name] = (first_kb, mid_kb, last_kb, last_cpu - first_cpu, last_at - first_at)
    return out
