"""The sweep step that expires undecided takeover requests and marks lapsed standing.

Called by every lease sweep (`leaseboard.sweeps.services.sweep_run`) after its lease
batches; the step is an ordinary service call, batched with SKIP LOCKED and
compare-and-set, so several workers and a duplicated beat may run it at once.
"""

from __future__ import annotations

from leaseboard.takeovers.services import takeover_requests_expire_due


def takeover_sweep_step(*, batch_size: int = 500) -> int:
    """Takeover requests and standings handled by this step."""
    return takeover_requests_expire_due(batch=batch_size)
