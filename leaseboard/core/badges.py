"""The page header's counts, each a selector of the app that owns the rows, registered in
that app's `AppConfig.ready()`: what waits for an approver (effects, by core; takeover
requests, by takeovers) and the sweeps' clock (by sweeps). The web layer that renders the
header cannot import takeovers or sweeps (their views import it: a cycle between packages,
tests/architecture/test_layers.py), so it reads them from here, and still in one query
per badge (leaseboard/web/pages.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet

Selector = Callable[[], QuerySet[Any]]

_awaiting_approver: dict[str, Selector] = {}
_sweep_clock: list[Selector] = []


def awaiting_approver_register(name: str, selector: Selector) -> None:
    """`selector()`: the rows of one kind waiting for an approver (unsliced, unordered)."""
    _awaiting_approver[name] = selector


def awaiting_approver() -> list[Selector]:
    return [_awaiting_approver[name] for name in sorted(_awaiting_approver)]


def sweep_clock_register(selector: Selector) -> None:
    """`selector()`: at most one row with `last_completed_at_ms`, when a sweep last finished."""
    _sweep_clock[:] = [selector]


def sweep_clock() -> Selector | None:
    return _sweep_clock[0] if _sweep_clock else None
