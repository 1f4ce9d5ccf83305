"""Request and response schemas of the v1 API; bounds here keep bad input out of the DB.

Enumerations come from the domain (one definition each), so the OpenAPI document, the
model choices and the check constraints cannot disagree. Response models declare every
field they send and nothing else (`additionalProperties: false`, every field present).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

from leaseboard.core.services.work import KEY_PATTERN
from leaseboard.domain.certainty import Certainty
from leaseboard.domain.errors import ALL_CODES, ERROR_CLASSES
from leaseboard.domain.reconciliation import Decision, Outcome, PolicyDecision, Resolution
from leaseboard.domain.text import json_storable, storable
from leaseboard.domain.timing import MAX_DURATION_MS
from leaseboard.domain.vocabulary import Admission, ExecutorKind, WorkStatus

# -- enumerations generated from the domain -------------------------------------------------

ErrorCode = StrEnum("ErrorCode", {code.upper(): code for code in sorted(ALL_CODES)})  # type: ignore[misc]
ErrorCode.__doc__ = "The stable, machine-readable refusal codes (docs/design.md §12)."
RefusingDecision = StrEnum(  # type: ignore[misc]
    "RefusingDecision",
    {d.upper(): d for d in sorted({cls.decision for cls in ERROR_CLASSES})},
)
RefusingDecision.__doc__ = "Which decision refused: admission, lease, authorization or request."


# -- scalar types -------------------------------------------------------------------------


def _storable(value: str) -> str:
    # PostgreSQL text holds no NUL and UTF-8 has no lone surrogate: a 400, not a DB error.
    if not storable(value):
        raise ValueError("must not contain NUL characters or lone surrogates")
    return value


def _json_storable(value: Any) -> Any:
    if not json_storable(value):
        raise ValueError("strings must not contain NUL characters or lone surrogates")
    return value


def _json_not_null(value: Any) -> Any:
    if value is None:
        raise ValueError("a JSON document, not null")
    return _json_storable(value)


Text = Annotated[str, AfterValidator(_storable)]
# A checkpoint's document: any JSON value but null (a null was a NOT NULL 500, issue 33).
JsonDocument = Annotated[
    Any,
    AfterValidator(_json_not_null),
    WithJsonSchema({"description": "any JSON value but null", "not": {"type": "null"}}),
]
JsonObject = Annotated[dict[str, Any], AfterValidator(_json_storable)]
# Strict: true, "1" and 1.0 are not epochs.
Epoch = Annotated[int, Field(ge=0, le=2**62, strict=True)]
Millis = Annotated[int, Field(ge=1, le=7 * 24 * 3600 * 1000, strict=True)]
Duration = Annotated[int, Field(ge=0, le=MAX_DURATION_MS, strict=True)]
WorkKey = Annotated[str, Field(min_length=1, max_length=200, pattern=KEY_PATTERN)]
UUID_FORMAT = {"format": "uuid"}
LeaseIdIn = Annotated[Text, Field(max_length=64, json_schema_extra=UUID_FORMAT)]
UuidOut = Annotated[str, Field(json_schema_extra=UUID_FORMAT)]
# A lease or effect id in a path: any other string is simply not found (404).
UuidPath = Annotated[str, WithJsonSchema({"type": "string", "format": "uuid", "maxLength": 64})]


class Out(Schema):
    """A response body: every field is always sent, and no other."""

    model_config = ConfigDict(
        json_schema_extra={"additionalProperties": False},
        json_schema_serialization_defaults_required=True,
    )


# -- problems ----------------------------------------------------------------------------------


class FieldError(Out):
    loc: list[str]
    msg: str


class Problem(Schema):
    """RFC 9457 problem details (application/problem+json). Optional members appear where
    they apply; `code` is one of the stable codes."""

    model_config = ConfigDict(json_schema_extra={"additionalProperties": False})

    type: str
    title: str
    status: int
    detail: str
    code: ErrorCode
    instance: str | None = None
    decision: RefusingDecision | None = None
    current_epoch: int | None = None
    your_epoch: int | None = None
    holder_kind: ExecutorKind | None = None
    reason: str | None = Field(
        None,
        description="why the lease ended; on_hold: why the work item is held; unavailable: "
        "why the database could not answer (statement_timeout, lock_timeout, contention, "
        "unreachable, deadline, commit_unknown)",
    )
    revoked_by: str | None = Field(None, description="who revoked the lease (lease_revoked)")
    param: str | None = Field(None, description="the request field that was refused")
    errors: list[FieldError] | None = Field(None, description="every invalid field")
    effect_id: UuidOut | None = None
    lease_id: UuidOut | None = None
    retry_after_ms: int | None = Field(None, description="when to try again (also Retry-After)")
    request_id: str | None = Field(
        None, description="internal_error and unavailable: the id this request is logged under"
    )
    admission: Admission | None = Field(None, description="the work item's admission")
    work_status: WorkStatus | None = Field(None, description="the work item's status")
    rule: str | None = Field(None, description="policy_denied: the rule that decided")
    queue: str | None = Field(
        None,
        description="the queue whose admission envelope refused; queue_not_allowed: the queue "
        "this credential may not use; idempotency_conflict on admission: the queue the work "
        "item is in",
    )
    leases_per_agent: int | None = Field(
        None, description="leases_per_agent: the queue's limit of live leases per agent"
    )
    limit: (
        Literal[
            "credential",
            "recipient",
            "address",
            "capacity",
            "scope",
            "leases_per_agent",
            "window",
        ]
        | None
    ) = Field(
        None,
        description="which limit refused: a rate limit (credential, recipient, address) or "
        "an admission envelope's (capacity, scope, leases_per_agent, window)",
    )


# -- work items ---------------------------------------------------------------------------------


class TimingOverrides(Schema):
    """Lease timing for this work item, within its queue's: a work item may tighten the
    policy, never outlive the queue's max_lifetime_ms."""

    model_config = ConfigDict(extra="forbid")

    ttl_ms: Duration | None = None
    renew_after_ms: Duration | None = None
    jeopardy_after_ms: Duration | None = None
    lock_delay_ms: Duration | None = None
    max_lifetime_ms: Duration | None = None


class WorkItemIn(Schema):
    key: WorkKey
    queue: Annotated[Text, Field(min_length=1, max_length=100)] = "default"
    title: Annotated[Text, Field(max_length=300)] = ""
    scope: JsonObject = Field(default_factory=dict)
    policy: TimingOverrides = Field(default_factory=TimingOverrides)


class WorkItemCreated(Out):
    key: str
    admission: Admission
    epoch: int
    code: ErrorCode | None = None


class WorkItemOut(Out):
    key: str
    queue: str
    title: str
    admission: Admission
    status: WorkStatus
    epoch: int
    holder: str | None
    holder_kind: ExecutorKind | None
    lease_id: UuidOut | None
    generation: int | None = Field(
        None,
        description="the live lease's fencing generation (its order is (generation, epoch)); "
        "none without a live lease",
    )
    certainty: Certainty | None
    expires_in_ms: int | None


class CompleteIn(Schema):
    lease_id: LeaseIdIn
    epoch: Epoch


class CompleteOut(Out):
    key: str
    status: WorkStatus
    epoch: int


# -- leases ----------------------------------------------------------------------------------------


class AcquireIn(Schema):
    ttl_ms: Millis | None = Field(None, description="this grant's ttl; default: the policy's")


class CheckpointOut(Out):
    seq: int
    epoch: int
    data: Any


class LeaseGranted(Out):
    lease_id: UuidOut
    work_key: str
    epoch: int
    generation: int = Field(
        0,
        description="the lease's fencing generation: the fencing order is (generation, "
        "epoch), compared lexicographically; it rises with every promotion of a new database "
        "primary (docs/design.md §5), 0 on SQLite",
    )
    ttl_ms: int
    renew_after_ms: int
    jeopardy_after_ms: int
    expires_in_ms: int
    fencing_token: str
    checkpoint: CheckpointOut | None


class EpochIn(Schema):
    epoch: Epoch


class RenewOut(Out):
    lease_id: UuidOut
    epoch: int
    certainty: Certainty
    expires_in_ms: int
    on_hold: bool = Field(
        False,
        description="an operator holds the lease: keep renewing, propose no new effect "
        "(they are refused on_hold) until the hold is released",
    )
    hold_reason: str | None = Field(None, description="why, when on hold")


# The batch's items are plain pydantic models, not ninja Schemas: a Schema wraps each
# object it validates in ninja's attribute getter (for Django models), which for a batch of
# 1,000 leases in and 1,000 results out cost ~40% of the request (docs/benchmarks.md).
class BatchItem(BaseModel):
    # Any id is answered in its own result (not_found when it is no lease id), not a 400.
    lease_id: Annotated[Text, Field(max_length=64)]
    epoch: Epoch


class BatchRenewIn(BaseModel):
    leases: Annotated[list[BatchItem], Field(max_length=1000)]


class BatchResultOut(BaseModel):
    model_config = Out.model_config

    lease_id: str
    ok: bool
    code: ErrorCode | None = None
    epoch: int | None = None
    expires_in_ms: int | None = None
    detail: str | None = None
    on_hold: bool = False
    hold_reason: str | None = None


class BatchRenewOut(BaseModel):
    model_config = Out.model_config

    results: list[BatchResultOut]


class ReleaseOut(Out):
    lease_id: UuidOut
    epoch: int
    state: Certainty


class CheckpointIn(Schema):
    epoch: Epoch
    data: JsonDocument


class CheckpointCreated(Out):
    seq: int
    epoch: int


# -- effects ---------------------------------------------------------------------------------------


class EffectIn(Schema):
    lease_id: LeaseIdIn
    epoch: Epoch
    kind: Annotated[Text, Field(min_length=1, max_length=100)]
    target: Annotated[Text, Field(min_length=1, max_length=500)]
    idempotency_key: Annotated[Text, Field(min_length=1, max_length=200)]
    payload: JsonObject | None = None


class EffectOut(Out):
    effect_id: UuidOut
    decision: Literal[Decision.AUTHORIZED, Decision.PENDING_APPROVAL]
    epoch: int
    fencing_token: str | None = None
    rule: str | None = Field(
        None, description="pending_approval: the rule that asked for an approver"
    )


class OutcomeIn(Schema):
    outcome: Outcome
    detail: Annotated[Text, Field(max_length=1000)] = ""


class OutcomeOut(Out):
    effect_id: UuidOut
    outcome: Outcome


class ReconcileIn(Schema):
    resolution: Resolution
    note: Annotated[Text, Field(min_length=1, max_length=1000)]
    lease_id: LeaseIdIn
    epoch: Epoch


class ReconcileOut(Out):
    effect_id: UuidOut
    resolution: Resolution


# -- fencing and recipients ---------------------------------------------------------------------


class Jwk(Out):
    """An Ed25519 public key (RFC 8037)."""

    kty: Literal["OKP"]
    crv: Literal["Ed25519"]
    alg: Literal["EdDSA"]
    use: Literal["sig"]
    kid: str
    x: str = Field(description="the public key, base64url without padding")


class Jwks(Out):
    keys: list[Jwk]


class RecipientReportIn(Schema):
    work_key: Annotated[Text, Field(min_length=1, max_length=200)]
    epoch: Epoch | None = None
    high_water: Epoch | None = None
    reason: Literal[
        "stale_epoch",
        "forged",
        "expired",
        "unknown_key",
        "wrong_work",
        "malformed",
        "no_effect",
        "payload_mismatch",
        "wrong_queue",
    ]
    recipient: Annotated[Text, Field(max_length=100)] | None = Field(
        default=None,
        description="ignored: a report is filed under the name of the recipient credential",
    )
    token: Annotated[Text, Field(max_length=4000)] | None = None
    detail: Annotated[Text, Field(max_length=1000)] = ""


class RecipientReportOut(Out):
    report_id: UuidOut
    work_key: str
    current_epoch: int


class FencingCheckIn(Schema):
    fencing_token: Annotated[Text, Field(min_length=1, max_length=4096)]
    digest: Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")] | None = Field(
        None,
        description="content digest of the request about to be executed (sha256 of the "
        "canonical JSON of kind, target and payload); or send kind, target and payload",
    )
    kind: Annotated[Text, Field(min_length=1, max_length=100)] | None = None
    target: Annotated[Text, Field(min_length=1, max_length=500)] | None = None
    payload: JsonObject | None = None
    queue: Annotated[Text, Field(min_length=1, max_length=100)] | None = Field(
        None,
        description="the queue this recipient accepts the effect from: a token decided in "
        "another queue (or naming none) is not valid (code wrong_queue)",
    )


class FencingCheckOut(Out):
    """Whether the standing a token proves is current now (Chubby's CheckSequencer)."""

    valid: bool
    current_epoch: int | None = Field(description="the work item's epoch now, if known")
    code: str | None = Field(
        description="why not: a token code (forged, expired, malformed, unknown_key, "
        "payload_mismatch, wrong_queue), stale_epoch, lease_expired, lease_released, "
        "lease_revoked or not_found"
    )
    work_key: str | None
    epoch: int | None
    generation: int | None = Field(
        None,
        description="the token's fencing generation (0 for a token that names none): its "
        "order is (generation, epoch), compared lexicographically",
    )
    current_generation: int | None = Field(
        None, description="the generation of the lease at the current epoch, if known"
    )
    effect_id: str | None
    certainty: str | None
    expires_in_ms: int | None = Field(description="the token's remaining life")
    detail: str | None = Field(None, description="why not, in words")
    queue: str | None = Field(None, description="the work item's queue")
    policy_version: int | None = Field(
        None,
        description="the queue's policy version the token's effect was decided under (its "
        "rules and the rules for every queue); none for a lease token",
    )


class PolicyExplainIn(Schema):
    queue: Annotated[Text, Field(max_length=100)] | None = None
    work_key: Annotated[Text, Field(max_length=200)] | None = Field(
        None, description="explain with this work item's evidence (its lease, checkpoint)"
    )
    kind: Annotated[Text, Field(min_length=1, max_length=100)]
    target: Annotated[Text, Field(min_length=1, max_length=500)]
    payload: JsonObject | None = None


class PolicyStep(Out):
    rule: str
    outcome: str
    detail: str


class PolicyExplainOut(Out):
    queue: str
    policy_version: int
    decision: PolicyDecision
    rule: str | None
    reason: str
    steps: list[PolicyStep]
    facts: dict[str, Any]
    error: str | None = Field(
        None,
        description="the deciding rule's condition could not be evaluated for these facts: "
        "the rule failed closed (its decision, or require_approval for an allowing rule)",
    )
