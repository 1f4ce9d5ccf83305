"""The sweep step that expires undecided takeover requests and marks lapsed standing.

Registered with the sweeps app's hook when that hook exists (leaseboard/sweeps); the step
itself is an ordinary service call and is safe to run from several workers at once.
"""

from __future__ import annotations

import importlib
import logging

log = logging.getLogger(__name__)

# Candidate hook locations offered by leaseboard.sweeps (first found wins).
_HOOKS = (
    ("leaseboard.sweeps.steps", "register_step"),
    ("leaseboard.sweeps.registry", "register_step"),
    ("leaseboard.sweeps.tasks", "register_step"),
    ("leaseboard.sweeps.sweep", "register_step"),
    ("leaseboard.sweeps.services", "register_step"),
)


def takeover_sweep_step(now_ms: int | None = None, **_: object) -> int:
    from leaseboard.takeovers.services import takeover_requests_expire_due

    return takeover_requests_expire_due(now_ms=now_ms)


def register_sweep_step() -> bool:
    for module_name, attr in _HOOKS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        register = getattr(module, attr, None)
        if register is None:
            continue
        register("takeovers", takeover_sweep_step)
        return True
    log.debug("no sweep hook found; takeover expiry runs only when called")
    return False
