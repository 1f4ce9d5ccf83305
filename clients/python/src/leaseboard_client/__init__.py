"""Leaseboard agent SDK: admit work, hold leases, propose effects; no Django import.

Start with `Client(base_url, token)` and `with client.hold("work-key") as holding: ...`.
"""

from __future__ import annotations

from leaseboard_client.api import (
    Admission,
    Client,
    EffectDecision,
    Grant,
    Renewal,
    RenewResult,
)
from leaseboard_client.errors import (
    ApprovalRequired,
    CapacityExhausted,
    Forbidden,
    InJeopardy,
    LeaseError,
    LeaseExpired,
    LeaseLost,
    LeaseReleased,
    LeaseRevoked,
    LocalJeopardy,
    LockDelay,
    NeedsReconciliation,
    NotFound,
    NotHolder,
    PolicyDenied,
    ProtocolError,
    RateLimited,
    StaleEpoch,
    TakeoverConflict,
    TransientError,
    Unauthenticated,
    ValidationError,
    WorkLeased,
    WorkNotAdmitted,
)
from leaseboard_client.holding import Holding, Renewer, process_renewer
from leaseboard_client.timing import ClientTiming, TimingError, local_deadline

__all__ = [
    "Admission",
    "ApprovalRequired",
    "CapacityExhausted",
    "Client",
    "ClientTiming",
    "EffectDecision",
    "Forbidden",
    "Grant",
    "Holding",
    "InJeopardy",
    "LeaseError",
    "LeaseExpired",
    "LeaseLost",
    "LeaseReleased",
    "LeaseRevoked",
    "LocalJeopardy",
    "LockDelay",
    "NeedsReconciliation",
    "NotFound",
    "NotHolder",
    "PolicyDenied",
    "ProtocolError",
    "RateLimited",
    "RenewResult",
    "Renewal",
    "Renewer",
    "StaleEpoch",
    "TakeoverConflict",
    "TimingError",
    "TransientError",
    "Unauthenticated",
    "ValidationError",
    "WorkLeased",
    "WorkNotAdmitted",
    "local_deadline",
    "process_renewer",
]
