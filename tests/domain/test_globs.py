"""Globs matched without backtracking (issue 33, part 2): the same answers as a plain
dynamic-programming matcher on everything hypothesis generates, and no hostile pattern can
hold a worker. The time itself is measured in bench/bench_glob.py, not here."""

from __future__ import annotations

import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from leaseboard.domain.globs import GLOB_MAX_WILDCARDS, glob_match, glob_problem
from leaseboard.domain.policy import RuleSetInvalid, RuleSpec, rule_set_compiled


def reference(pattern: str, text: str) -> bool:
    """The definition, as a table: pattern[i:] matches text[j:]."""

    @cache
    def m(i: int, j: int) -> bool:
        if i == len(pattern):
            return j == len(text)
        ch = pattern[i]
        if ch == "*":
            return m(i + 1, j) or (j < len(text) and m(i, j + 1))
        return j < len(text) and (ch == "?" or ch == text[j]) and m(i + 1, j + 1)

    return m(0, 0)


def old_regex(pattern: str) -> re.Pattern[str]:
    parts = (".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.compile("".join(parts) + r"\Z", re.DOTALL)


ALPHABET = "ab*?.\n\\[]"
patterns = st.text(alphabet=ALPHABET, max_size=12)
texts = st.text(alphabet="ab.\n\\[]*?", max_size=16)


@settings(max_examples=1500, deadline=None, derandomize=True, database=None)
@given(pattern=patterns, text=texts)
@example(pattern="*a*a*a*a*b", text="aaaaab")
@example(pattern="a*", text="a\n")
@example(pattern="?", text="\n")
@example(pattern="**", text="")
@example(pattern="*ab*ab", text="abab")
def test_the_matcher_agrees_with_the_definition(pattern: str, text: str) -> None:
    expected = reference(pattern, text)
    assert glob_match(pattern, text) is expected
    assert (old_regex(pattern).match(text) is not None) is expected  # the old one, on small input


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(pieces=st.lists(st.text(alphabet="ab?", min_size=1, max_size=4), max_size=6), data=st.data())
def test_a_string_built_from_the_pattern_matches_it(pieces: list[str], data: st.DataObject) -> None:
    pattern = "*" + "*".join(pieces) + "*"
    fill = [data.draw(st.text(alphabet="abc", max_size=5)) for _ in range(len(pieces) + 1)]
    text = fill[0] + "".join(p.replace("?", "c") + f for p, f in zip(pieces, fill[1:], strict=True))
    assert glob_match(pattern, text)


FINDING = """
from leaseboard.domain.policy import RuleSpec, decide, rule_set_compiled
rules = rule_set_compiled([RuleSpec("trap", "*", "*a*a*a*a*b", decision="deny")], "allow")
print(decide(rules, kind="payment.refund", target="a" * 500, activation=dict).decision)
"""


def test_finding_a_backtracking_target_glob_no_longer_holds_the_worker() -> None:
    """Issue 33: `*a*a*a*a*b` was saved, and an agent's target of 230 `a`s took 4.9 s (500
    froze a gunicorn worker until it was killed at 32 s). In a child process, because the
    old regex held the GIL for minutes: the generous bound is only so that the old code
    fails instead of hanging."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", FINDING],
            capture_output=True,
            text=True,
            timeout=20,
            cwd=Path(__file__).resolve().parents[2],
        )
    except subprocess.TimeoutExpired:
        pytest.fail("deciding one effect against *a*a*a*a*b took more than 20 s")
    assert done.stdout.strip() == "allow", done.stderr


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("*?" * (GLOB_MAX_WILDCARDS // 2 + 1), "wildcards"),
        ("a" * 501, "at most 500 characters"),
        ("pay\x00ment.*", "control characters"),
        ("pay\r\nment", "control characters"),
        ("x\ud800", "surrogate"),
    ],
)
def test_a_glob_past_the_bounds_is_refused_when_saved(pattern: str, problem: str) -> None:
    assert problem in (glob_problem(pattern, what="target", longest=500) or "")
    with pytest.raises(RuleSetInvalid, match=problem):
        rule_set_compiled([RuleSpec("r", "*", pattern, decision="deny")], "allow")
