"""Leaseboard agent SDK: admit work, hold leases, run effects under them.

Sync: `Client(base_url, token)` and `with client.hold("work-key") as holding: ...`.
Asyncio: `AsyncClient(base_url, token)` and `async with client.hold("work-key") as holding:`.
Effects: `with holding.effect(kind, target) as fx:` (or `async with`) proposes, refuses
without standing, hands the recipient the effect's token (`fx.headers()`) and reports the
outcome. Needs httpx only; the recipient side is `leaseboard_recipient` (extra [recipient]).
"""

from __future__ import annotations

from leaseboard_client.aio import AsyncClient, AsyncEffectScope, AsyncHolding, AsyncRenewer
from leaseboard_client.api import Client
from leaseboard_client.effects import Effect, EffectScope, outcome_of
from leaseboard_client.errors import (
    AlreadyDecided,
    ApprovalExpired,
    ApprovalRequired,
    CapacityExhausted,
    CommitUnknown,
    Forbidden,
    IdempotencyConflict,
    InJeopardy,
    InternalError,
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
    OnHold,
    PayloadMismatch,
    PolicyDenied,
    ProtocolError,
    QueueNotAllowed,
    RateLimited,
    StaleEpoch,
    TakeoverConflict,
    TransientError,
    Unauthenticated,
    Unavailable,
    ValidationError,
    WorkLeased,
    WorkNotAdmitted,
)
from leaseboard_client.holding import Holding, Renewer, process_renewer
from leaseboard_client.protocol import Admission, EffectDecision, Grant, Renewal, RenewResult
from leaseboard_client.timing import ClientTiming, TimingError, local_deadline
from leaseboard_client.version import API_VERSION, __version__

__all__ = [
    "API_VERSION",
    "Admission",
    "AlreadyDecided",
    "ApprovalExpired",
    "ApprovalRequired",
    "AsyncClient",
    "AsyncEffectScope",
    "AsyncHolding",
    "AsyncRenewer",
    "CapacityExhausted",
    "Client",
    "ClientTiming",
    "Effect",
    "EffectDecision",
    "EffectScope",
    "Forbidden",
    "Grant",
    "Holding",
    "IdempotencyConflict",
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
    "OnHold",
    "PayloadMismatch",
    "PolicyDenied",
    "ProtocolError",
    "QueueNotAllowed",
    "RateLimited",
    "Unavailable",
    "CommitUnknown",
    "InternalError",
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
    "__version__",
    "local_deadline",
    "outcome_of",
    "process_renewer",
]
