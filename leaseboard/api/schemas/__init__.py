"""Request and response schemas of the v1 API; bounds here keep bad input out of the DB.

Enumerations come from the domain (one definition each), so the OpenAPI document, the
model choices and the check constraints cannot disagree. Response models declare every
field they send and nothing else (`additionalProperties: false`, every field present).

One module per subject, in the order of api/v1.py: the building blocks (base), problem
details, work items, leases, effects (and policy explain), fencing and recipients. Every
schema is imported here, so `from leaseboard.api import schemas as s; s.LeaseGranted`
reaches it by its name.
"""

from leaseboard.api.schemas.base import (
    UUID_FORMAT,
    Duration,
    Epoch,
    ErrorCode,
    JsonDocument,
    JsonObject,
    LeaseIdIn,
    Millis,
    Out,
    RefusingDecision,
    Text,
    UuidOut,
    UuidPath,
    WorkKey,
)
from leaseboard.api.schemas.effects import (
    EffectIn,
    EffectOut,
    OutcomeIn,
    OutcomeOut,
    PolicyExplainIn,
    PolicyExplainOut,
    PolicyStep,
    ReconcileIn,
    ReconcileOut,
)
from leaseboard.api.schemas.fencing import (
    FencingCheckIn,
    FencingCheckOut,
    Jwk,
    Jwks,
    RecipientReportIn,
    RecipientReportOut,
)
from leaseboard.api.schemas.leases import (
    AcquireIn,
    BatchItem,
    BatchRenewIn,
    BatchRenewOut,
    BatchResultOut,
    CheckpointCreated,
    CheckpointIn,
    CheckpointOut,
    EpochIn,
    LeaseGranted,
    ReleaseOut,
    RenewOut,
)
from leaseboard.api.schemas.problems import (
    FieldError,
    Problem,
)
from leaseboard.api.schemas.work import (
    CompleteIn,
    CompleteOut,
    TimingOverrides,
    WorkItemCreated,
    WorkItemIn,
    WorkItemOut,
)

__all__ = [
    "AcquireIn",
    "BatchItem",
    "BatchRenewIn",
    "BatchRenewOut",
    "BatchResultOut",
    "CheckpointCreated",
    "CheckpointIn",
    "CheckpointOut",
    "CompleteIn",
    "CompleteOut",
    "Duration",
    "EffectIn",
    "EffectOut",
    "Epoch",
    "EpochIn",
    "ErrorCode",
    "FencingCheckIn",
    "FencingCheckOut",
    "FieldError",
    "JsonDocument",
    "JsonObject",
    "Jwk",
    "Jwks",
    "LeaseGranted",
    "LeaseIdIn",
    "Millis",
    "Out",
    "OutcomeIn",
    "OutcomeOut",
    "PolicyExplainIn",
    "PolicyExplainOut",
    "PolicyStep",
    "Problem",
    "RecipientReportIn",
    "RecipientReportOut",
    "ReconcileIn",
    "ReconcileOut",
    "RefusingDecision",
    "ReleaseOut",
    "RenewOut",
    "Text",
    "TimingOverrides",
    "UUID_FORMAT",
    "UuidOut",
    "UuidPath",
    "WorkItemCreated",
    "WorkItemIn",
    "WorkItemOut",
    "WorkKey",
]
