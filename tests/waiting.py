"""Waiting for a condition instead of for a fixed time: a test polls what it waits for, so
it goes on the moment the condition holds and fails with the condition's name (not a
flaky assertion) when it never does. tests/architecture/test_no_fixed_sleeps.py keeps
sleeps out of tests except inside a polling loop like these."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    *,
    what: str,
    timeout_s: float = 10.0,
    interval_s: float = 0.02,
    detail: Callable[[], str] = lambda: "",
) -> T:
    """The condition's first truthy value; AssertionError naming `what` (and `detail()`,
    e.g. a server's log) after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:g} s\n{detail()}".rstrip())
        time.sleep(interval_s)


async def async_wait_until(
    condition: Callable[[], T], *, what: str, timeout_s: float = 10.0, interval_s: float = 0.005
) -> T:
    """wait_until on an event loop: the loop runs other tasks while it polls."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:g} s")
        await asyncio.sleep(interval_s)
