"""Read what bench/soak_memprobe.py wrote (`SOAK_MEMPROBE=<dir>`): the samples as a table,
and, where tracemalloc snapshots were taken, what grew from the first snapshot to the last
(and from the middle one to the last) by line and by traceback.

    .venv/bin/python bench/soak_memdiff.py <dir> [--top 20]
"""

from __future__ import annotations

import argparse
import json
import tracemalloc
from pathlib import Path


def table(path: Path) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    print(f"\n## {path.stem}\n")
    print(
        "| t s | RSS MB | anon MB | glibc in use MB | glibc free MB | glibc mmapped MB | "
        "pymalloc arenas | pymalloc used MB | pymalloc free blocks MB | blocks | gc objects | "
        "tasks | traced MB |\n|" + "---|" * 13
    )
    mb = 1 / 1024 / 1024
    for r in rows:
        m, p = r.get("malloc", {}), r.get("pymalloc", {})
        traced = f"{r['traced'] * mb:.1f}" if "traced" in r else ""
        print(
            f"| {r['t']:.0f} | {r['VmRSS'] / 1024:.1f} | {r.get('RssAnon', 0) / 1024:.1f} | "
            f"{m.get('in_use', 0) * mb:.1f} | {m.get('free', 0) * mb:.1f} | "
            f"{m.get('mmapped', 0) * mb:.1f} | {p.get('arenas', '')} | "
            f"{p.get('allocated_bytes', 0) * mb:.1f} | {p.get('free_block_bytes', 0) * mb:.1f} | "
            f"{r['blocks']:,} | {r['gc_objects']:,} | {r['tasks']} | {traced} |"
        )
    last = rows[-1]
    extras = {k: v for k, v in last.items() if k in ("renewer_holdings", "pool", "stats_values")}
    print(f"\nlast sample: {extras}; gc types grown since the first: {last['types_grown']}")


def diff(older: Path, newer: Path, top: int) -> None:
    a, b = tracemalloc.Snapshot.load(str(older)), tracemalloc.Snapshot.load(str(newer))
    size = sum(t.size for t in b.traces) - sum(t.size for t in a.traces)
    print(f"\n### {older.name} -> {newer.name}: traced {size / 1024:+,.0f} KiB\n")
    for key in ("lineno", "traceback"):
        print(f"top {top} by {key}:")
        for stat in b.compare_to(a, key)[:top]:
            print(f"  {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks  ", end="")
            if key == "lineno":
                print(stat.traceback[0])
            else:
                print()
                for line in stat.traceback.format()[-16:]:
                    print("      " + line)
        print()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("dir", type=Path)
    p.add_argument("--top", type=int, default=20)
    args = p.parse_args()
    for path in sorted(args.dir.glob("*.jsonl")):
        table(path)
        snaps = sorted(args.dir.glob(f"{path.stem}-*.snap"))
        if len(snaps) >= 2:
            diff(snaps[0], snaps[-1], args.top)
            if len(snaps) >= 3:
                diff(snaps[len(snaps) // 2], snaps[-1], args.top)


if __name__ == "__main__":
    main()
