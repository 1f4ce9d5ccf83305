"""Glob matching time against the target's length, for the hostile pattern of issue 33
(`*a*a*a*a*b` against runs of `a`) and a plain one, beside the backtracking regular
expression the rules used before (leaseboard.domain.globs says why it is gone).

    .venv/bin/python bench/bench_glob.py [--lengths 125,250,500,1000,2000] [--repeat 20]

For each length it prints the best time per match of leaseboard.domain.globs and, up to
--regex-max characters (beyond, one match takes minutes), of the old regex. It then checks
that the new matcher grows linearly: the time per character at the longest length is at
most --slack times that at the shortest (a quadratic matcher's would grow with the length,
16x across 125 -> 2,000), and exits 1 if not. A benchmark, not a test: read it with the
load average it prints.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from leaseboard.domain.globs import glob_compiled

HOSTILE = "*a*a*a*a*b"  # issue 33's pattern, against "a" * n
# The new matcher's own worst case: a 21-character piece that fails at its last character
# at every position of "a" * n + "b" (n x 21 steps).
STRESS = "*" + "a" * 20 + "c*b"
PLAIN = "payment.*.refund-?"


def old_regex(pattern: str) -> re.Pattern[str]:
    """What leaseboard.domain.policy.glob_regex compiled before issue 33."""
    parts = (".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.compile("".join(parts) + r"\Z", re.DOTALL)


def best_s(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", default="125,250,500,1000,2000")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--regex-lengths", default="25,50,100,200")
    parser.add_argument("--slack", type=float, default=3.0)
    args = parser.parse_args()
    lengths = [int(n) for n in args.lengths.split(",")]
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    hostile, stress, plain = glob_compiled(HOSTILE), glob_compiled(STRESS), glob_compiled(PLAIN)
    regex = old_regex(HOSTILE)
    print(f"the old regex, {HOSTILE!r} against 'a' * n (one try each):")
    for n in [int(n) for n in args.regex_lengths.split(",")]:
        text = "a" * n
        old_s = best_s(lambda text=text: regex.match(text), 1)  # type: ignore[misc]
        new_s = best_s(lambda text=text: hostile.match(text), args.repeat)  # type: ignore[misc]
        print(f"  {n:4d} chars: old {old_s * 1e3:9.2f} ms   new {new_s * 1e6:6.2f} µs")
    per_char: list[float] = []
    print(f"{'chars':>6} {'issue µs':>9} {'stress µs':>10} {'µs/char':>8} {'plain µs':>9}")
    for n in lengths:
        text = "a" * n
        assert not hostile.match(text) and not stress.match(text + "b")
        h = best_s(lambda text=text: hostile.match(text), args.repeat)  # type: ignore[misc]
        t = best_s(lambda text=text: stress.match(text + "b"), args.repeat)  # type: ignore[misc]
        p = best_s(
            lambda n=n: plain.match("payment." + "x" * n + ".refund-1"),  # type: ignore[misc]
            args.repeat,
        )
        per_char.append(t / n)
        print(f"{n:6d} {h * 1e6:9.1f} {t * 1e6:10.1f} {t / n * 1e6:8.4f} {p * 1e6:9.1f}")
    growth = per_char[-1] / per_char[0]
    verdict = "linear" if growth <= args.slack else "NOT linear"
    print(f"time per character, longest / shortest: {growth:.2f} ({verdict}; slack {args.slack})")
    return 0 if growth <= args.slack else 1


if __name__ == "__main__":
    raise SystemExit(main())
