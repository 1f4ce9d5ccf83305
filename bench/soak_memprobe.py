"""Where a soak agent process's memory goes, sampled while it runs (opt-in: `SOAK_MEMPROBE`).

Each sample is one JSON line: RSS (anonymous and file-backed), glibc's main heap and mmaps
(mallinfo2: bytes in use, free bytes kept in the heap), pymalloc's arenas and blocks
(`sys._debugmallocstats`), Python's allocated blocks, gc-tracked objects by type (the
types that grew most since the first sample), asyncio tasks, and, with
`SOAK_TRACEMALLOC=<frames>`, tracemalloc's traced bytes and a snapshot dumped next to it.

Live objects that accumulate show up in the allocated blocks, the object counts and
tracemalloc; memory the allocators keep after the objects are gone shows up only in RSS and
in glibc's free bytes or pymalloc's free blocks. bench/soak_memdiff.py reads the output.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import json
import os
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def _libc() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _libc()


def mallinfo() -> dict[str, int]:
    """glibc's view: `arena` bytes of heap got with brk/sbrk (main arena) or in other
    arenas, `uordblks` of it in use, `fordblks` free but kept, `hblkhd` in mmapped chunks."""
    if _LIBC is None:
        return {}
    info = _LIBC.mallinfo2()
    return {
        "arena": info.arena,
        "in_use": info.uordblks,
        "free": info.fordblks,
        "mmapped": info.hblkhd,
        "keepcost": info.keepcost,
    }


def proc_status() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile", "VmData"):
            out[name] = int(value.split()[0])
    return out


def pymalloc_stats() -> dict[str, int]:
    """The totals `sys._debugmallocstats()` prints to the C stderr, captured (none while
    tracemalloc traces: it hooks the allocator and pymalloc then reports nothing)."""
    wanted = {
        "# arenas allocated current": "arenas",
        "# arenas highwater mark": "arenas_highwater",
        "# bytes in allocated blocks": "allocated_bytes",
        "# bytes in available blocks": "free_block_bytes",
        "unused pools *": "unused_pool_bytes",
    }
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as out:
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read().decode(errors="replace")
    stats = {}
    for line in text.splitlines():
        label, _, value = line.rpartition("=")
        label = label.strip()
        for prefix, name in wanted.items():
            if prefix in label:
                stats[name] = int(value.strip().replace(",", ""))
    return stats


class MemProbe:
    def __init__(
        self,
        directory: Path,
        prefix: str,
        *,
        every_s: float = 30.0,
        frames: int = 0,
        extras: dict[str, Callable[[], Any]] | None = None,
    ) -> None:
        self.directory = directory
        self.prefix = prefix
        self.every_s = every_s
        self.frames = frames
        self.extras = extras or {}
        self.first_types: Counter[str] | None = None
        self.started = 0.0
        self.n = 0
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_env(cls, prefix: str, **kwargs: Any) -> MemProbe | None:
        directory = os.environ.get("SOAK_MEMPROBE")
        if not directory:
            return None
        Path(directory).mkdir(parents=True, exist_ok=True)
        # SOAK_TRACEMALLOC_ONLY=soak1,soak3: trace only these processes (the others' RSS
        # is then free of tracemalloc's own memory, for comparison).
        only = [p for p in os.environ.get("SOAK_TRACEMALLOC_ONLY", "").split(",") if p]
        frames = int(os.environ.get("SOAK_TRACEMALLOC", "0"))
        return cls(
            Path(directory),
            prefix,
            every_s=float(os.environ.get("SOAK_MEMPROBE_S", "30")),
            frames=frames if not only or prefix in only else 0,
            **kwargs,
        )

    def start(self) -> None:
        if self.frames:
            tracemalloc.start(self.frames)
        self.started = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="memprobe")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self.sample()

    async def _run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self.every_s)

    def sample(self) -> None:
        types = Counter(type(o).__name__ for o in gc.get_objects())
        if self.first_types is None:
            self.first_types = types
        grown = types.copy()
        grown.subtract(self.first_types)
        row: dict[str, Any] = {
            "t": round(time.monotonic() - self.started, 1),
            **proc_status(),
            "malloc": mallinfo(),
            "pymalloc": pymalloc_stats(),
            "blocks": sys.getallocatedblocks(),
            "gc_objects": sum(types.values()),
            "types_grown": dict(grown.most_common(12)),
            "tasks": len(asyncio.all_tasks()),
            **{name: extra() for name, extra in self.extras.items()},
        }
        if tracemalloc.is_tracing():
            row["traced"], row["traced_peak"] = tracemalloc.get_traced_memory()
            snapshot = tracemalloc.take_snapshot().filter_traces(
                [tracemalloc.Filter(False, tracemalloc.__file__)]
            )
            snapshot.dump(str(self.directory / f"{self.prefix}-{self.n:03d}.snap"))
            del snapshot
        with (self.directory / f"{self.prefix}.jsonl").open("a") as out:
            out.write(json.dumps(row) + "\n")
        self.n += 1
