"""Waiting for a condition instead of for a fixed time: a test polls what it waits for, so
it goes on the moment the condition holds and fails with the condition's name (not a
flaky assertion) when it never does. tests/architecture/test_no_fixed_sleeps.py keeps
sleeps out of tests except inside a polling loop like these."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")


def _polls(
    condition: Callable[[], T], what: str, timeout_s: float, detail: Callable[[], str]
) -> Iterator[T | None]:
    """Yields None while the condition is falsy, then its value; AssertionError naming
    `what` (and `detail()`) once `timeout_s` has passed. The caller sleeps between."""
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:g} s\n{detail()}".rstrip())
        yield None
    yield value


def wait_until(
    condition: Callable[[], T],
    *,
    what: str,
    timeout_s: float = 10.0,
    interval_s: float = 0.02,
    detail: Callable[[], str] = lambda: "",
) -> T:
    """The condition's first truthy value, polled every `interval_s`."""
    for value in _polls(condition, what, timeout_s, detail):
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError("unreachable")


async def async_wait_until(
    condition: Callable[[], T], *, what: str, timeout_s: float = 10.0, interval_s: float = 0.005
) -> T:
    """wait_until on an event loop: the loop runs other tasks while it polls."""
    for value in _polls(condition, what, timeout_s, lambda: ""):
        if value:
            return value
        await asyncio.sleep(interval_s)
    raise AssertionError("unreachable")
