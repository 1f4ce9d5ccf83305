"""Globs for rules and scopes (`*` any run of characters, `?` one character, everything else
literal), matched without backtracking.

A glob compiled to a regular expression (`.*a.*a.*a.*b`) backtracks: Python's `re` took
4.9 s for 230 characters against `*a*a*a*a*b` (issue 33). Here the pattern is split at its
stars and each piece between them is found at its leftmost place after the previous one;
that greedy choice is never wrong for a glob (a later piece can only gain from an earlier
piece ending sooner), so no choice is ever revisited. A piece has no quantifier (literals
and `?`), so finding it costs at most its length per position: a match costs at most
len(text) x len(pattern) character steps, whatever the pattern (bench/bench_glob.py).
Pure; no Django.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# A saved glob is at most this long, and has at most this many wildcards (a bound checked
# when a rule or a scope is saved; the matcher itself does not need it).
GLOB_MAX = 500
GLOB_MAX_WILDCARDS = 50


def _piece(text: str) -> re.Pattern[str]:
    # Literals and `?` only: no quantifier, no alternation, hence nothing to backtrack into.
    return re.compile("".join("." if ch == "?" else re.escape(ch) for ch in text), re.DOTALL)


@dataclass(frozen=True)
class Glob:
    pattern: str
    head: re.Pattern[str]  # before the first star (the whole pattern when it has none)
    middle: tuple[re.Pattern[str], ...]  # between stars, each non-empty
    tail: re.Pattern[str] | None  # after the last star; None when there is no star
    head_len: int
    tail_len: int

    def match(self, text: str) -> bool:
        """Does the whole of `text` match?"""
        if self.tail is None:
            return len(text) == self.head_len and self.head.match(text) is not None
        end = len(text) - self.tail_len
        if end < self.head_len or self.head.match(text, 0, self.head_len) is None:
            return False
        if self.tail.match(text, end) is None:
            return False
        pos = self.head_len
        for piece in self.middle:
            found = piece.search(text, pos, end)
            if found is None:
                return False
            pos = found.end()
        return True


@lru_cache(maxsize=4096)
def glob_compiled(pattern: str) -> Glob:
    pieces = pattern.split("*")
    if len(pieces) == 1:
        return Glob(pattern, _piece(pattern), (), None, len(pattern), 0)
    head, *middle, tail = pieces
    return Glob(
        pattern,
        _piece(head),
        tuple(_piece(p) for p in middle if p),
        _piece(tail),
        len(head),
        len(tail),
    )


def glob_match(pattern: str, text: str) -> bool:
    return glob_compiled(pattern).match(text)


def literal_length(pattern: str) -> int:
    """The fewest characters a string it matches has."""
    return sum(1 for ch in pattern if ch != "*")


def glob_problem(pattern: str, *, what: str, longest: int) -> str | None:
    """Why this glob cannot be saved, or None."""
    if not pattern:
        return "a glob is 1 or more characters; * matches anything"
    if len(pattern) > GLOB_MAX:
        return f"a glob is at most {GLOB_MAX} characters"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in pattern):
        return "a glob has no control characters"
    if not pattern.isprintable() and any(0xD800 <= ord(ch) <= 0xDFFF for ch in pattern):
        return "a glob has no lone surrogates"
    wildcards = sum(1 for ch in pattern if ch in "*?")
    if wildcards > GLOB_MAX_WILDCARDS:
        return f"a glob has at most {GLOB_MAX_WILDCARDS} wildcards (* and ?)"
    if literal_length(pattern) > longest:
        return f"matches nothing: an effect {what} is at most {longest} characters"
    return None
