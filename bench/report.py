"""What `make bench` prints and writes to docs/benchmarks.md: the rows, the API ÷ bare
framework table, the targets, and the machine line."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import ROOT
from bench.loadgen import Load

MARKER = "<!-- bench:results -->"


@dataclass
class Row:
    what: str
    conc: str
    rate: float | None
    unit: str
    p50_ms: float | None = None
    p99_ms: float | None = None
    note: str = ""


def failed_note(n: int) -> str:
    return f"; {n} failed" if n else ""


def fmt(v: float | None, digits: int = 0) -> str:
    return "—" if v is None else f"{v:,.{digits}f}"


def table(rows: list[Row]) -> str:
    head = (
        "| measurement | conc. | rate | unit | p50 ms | p99 ms | note |\n"
        "|---|---|---|---|---|---|---|"
    )
    body = [
        f"| {r.what} | {r.conc} | {fmt(r.rate)} | {r.unit} | {fmt(r.p50_ms, 1)} | "
        f"{fmt(r.p99_ms, 1)} | {r.note} |"
        for r in rows
    ]
    return "\n".join([head, *body])


def anchor_table(pairs: list[tuple[str, Load, str, Load]]) -> str:
    """API beside the bare Django project: (API path, its load, bare path, its load)."""
    head = (
        "| API path (16 conns) | API /s | API p99 ms | bare Django anchor | bare /s | "
        "bare p99 ms | API ÷ bare |\n|---|---|---|---|---|---|---|"
    )
    body = [
        f"| {api_what} | {fmt(api.rate)} | {fmt(api.p99_ms, 1)} | {bare_what} | "
        f"{fmt(bare.rate)} | {fmt(bare.p99_ms, 1)} | {api.rate / bare.rate:.2f} |"
        for api_what, api, bare_what, bare in pairs
    ]
    return "\n".join([head, *body])


def targets(
    res: dict[str, Load], best_batch: float, pg_tps: float | None, etcd: float | None
) -> list[str]:
    out = []

    def check(name: str, ok: bool | None, figures: str) -> None:
        mark = "n/a" if ok is None else ("MET" if ok else "MISSED")
        out.append(f"- {mark}: {name} — {figures}")

    # Issue 14's goals, each against the bare Django anchor measured in the same run.
    single, bare = res["single-16"], res["bare-16"]
    r16 = single.rate / bare.rate
    check("single renew ≥ 0.7 × the bare renew view (16 connections)", r16 >= 0.7, f"{r16:.2f}")
    check(
        "single renew p99 ≤ the bare view's p99 + 10 ms",
        single.p99_ms <= bare.p99_ms + 10,
        f"{single.p99_ms:.1f} vs {bare.p99_ms:.1f} ms",
    )
    for name, api, anchor in (
        ("acquire", res["acquire"], res["grant-1"]),
        ("effect authorization", res["effects"], res["grant-2"]),
    ):
        ratio = api.rate / anchor.rate
        check(f"{name} ≥ 0.5 × the bare grant transaction", ratio >= 0.5, f"{ratio:.2f}")
    if pg_tps:
        check(
            "batch renew ≥ 3 × pgbench's single-row fenced UPDATE",
            best_batch >= 3 * pg_tps,
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
    return out


def machine(db_url: str, workers: int, seconds: int) -> str:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import psycopg

    with psycopg.connect(db_url) as conn:
        pg = conn.execute("SHOW server_version").fetchone()[0]
    wrk_v = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.split("\n")[0]
    return (
        f"{os.cpu_count()} CPUs ({cpu}), {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, PostgreSQL {pg}, {wrk_v.strip()}, "
        f"gunicorn {workers} sync workers, {seconds} s per measurement, "
        f"load average at the end {os.getloadavg()[0]:.1f} (other work on the machine skews "
        "absolute figures; compare ratios)"
    )


def write_doc(machine_line: str, sections: list[tuple[str, str]]) -> Path:
    """Replace the results between the two markers in docs/benchmarks.md."""
    doc = ROOT / "docs" / "benchmarks.md"
    doc.parent.mkdir(exist_ok=True)
    text = doc.read_text() if doc.exists() else ""
    body = "".join(f"{title}\n\n" * bool(title) + f"{content}\n\n" for title, content in sections)
    results = (
        f"{MARKER}\n## Latest run ({time.strftime('%Y-%m-%d %H:%M')})\n\n"
        f"Machine: {machine_line}.\n\n{body}".rstrip("\n")
        + f"\n{MARKER}\n"
    )
    if MARKER in text:
        pre, _, rest = text.partition(MARKER)
        _, _, post = rest.partition(MARKER)
        text = pre + results + post.lstrip("\n")
    else:
        text = (text or "# Benchmarks\n\n") + "\n" + results
    doc.write_text(text)
    return doc


def load_row(what: str, conns: int, load: Load, unit: str, note: str = "") -> Row:
    return Row(
        what, str(conns), load.rate, unit, load.p50_ms, load.p99_ms, note + failed_note(load.failed)
    )
