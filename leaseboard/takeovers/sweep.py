"""The sweep step that expires undecided takeover requests and marks lapsed standing.

Registered with `leaseboard.sweeps.services.register_step` at start-up; the step is an
ordinary service call, batched with SKIP LOCKED and compare-and-set, so several workers
and a duplicated beat may run it at once.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def takeover_sweep_step(*, batch_size: int = 500, **_: object) -> int:
    from leaseboard.takeovers.services import takeover_requests_expire_due

    return takeover_requests_expire_due(batch=batch_size)


def register_sweep_step() -> bool:
    try:
        from leaseboard.sweeps.services import register_step
    except ImportError:  # sweeps not installed: expiry still runs when called directly
        log.debug("no sweep hook; takeover expiry runs only when called")
        return False
    register_step("takeovers", takeover_sweep_step)
    return True
