"""Request and response schemas of the v1 API; bounds here keep bad input out of the DB."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import AfterValidator, Field


def _no_nul(value: str) -> str:
    # PostgreSQL text cannot hold NUL; refuse it as bad input instead of failing in the DB.
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


Text = Annotated[str, AfterValidator(_no_nul)]
Epoch = Annotated[int, Field(ge=0, le=2**62)]
Millis = Annotated[int, Field(ge=1, le=7 * 24 * 3600 * 1000)]


class Problem(Schema):
    type: str
    title: str
    status: int
    detail: str
    code: str
    instance: str | None = None
    current_epoch: int | None = None
    your_epoch: int | None = None
    holder_kind: str | None = None


class WorkItemIn(Schema):
    key: Annotated[Text, Field(min_length=1, max_length=200)]
    queue: Annotated[Text, Field(min_length=1, max_length=100)] = "default"
    title: Annotated[Text, Field(max_length=300)] = ""
    scope: dict[str, Any] = Field(default_factory=dict)
    policy: dict[str, Annotated[int, Field(ge=0, le=30 * 24 * 3600 * 1000)]] = Field(
        default_factory=dict,
        description="lease timing overrides: ttl_ms, renew_after_ms, jeopardy_after_ms, "
        "lock_delay_ms, max_lifetime_ms",
    )


class WorkItemCreated(Schema):
    key: str
    admission: Literal["admitted", "waiting", "rejected"]
    epoch: int
    code: str | None = None


class WorkItemOut(Schema):
    key: str
    queue: str
    title: str
    admission: str
    status: str
    epoch: int
    holder: str | None
    holder_kind: str | None
    lease_id: str | None
    certainty: str | None
    expires_in_ms: int | None


class AcquireIn(Schema):
    ttl_ms: Millis | None = None


class CheckpointOut(Schema):
    seq: int
    epoch: int
    data: Any


class LeaseGranted(Schema):
    lease_id: str
    work_key: str
    epoch: int
    ttl_ms: int
    renew_after_ms: int
    jeopardy_after_ms: int
    expires_in_ms: int
    fencing_token: str
    checkpoint: CheckpointOut | None


class EpochIn(Schema):
    epoch: Epoch


class RenewOut(Schema):
    lease_id: str
    epoch: int
    certainty: str
    expires_in_ms: int


class BatchItem(Schema):
    lease_id: Annotated[Text, Field(max_length=64)]
    epoch: Epoch


class BatchRenewIn(Schema):
    leases: Annotated[list[BatchItem], Field(max_length=1000)]


class BatchResultOut(Schema):
    lease_id: str
    ok: bool
    code: str | None = None
    epoch: int | None = None
    expires_in_ms: int | None = None
    detail: str | None = None


class BatchRenewOut(Schema):
    results: list[BatchResultOut]


class ReleaseOut(Schema):
    lease_id: str
    epoch: int
    state: str


class CompleteIn(Schema):
    lease_id: Annotated[Text, Field(max_length=64)]
    epoch: Epoch


class CompleteOut(Schema):
    key: str
    status: str
    epoch: int


class CheckpointIn(Schema):
    epoch: Epoch
    data: Any


class CheckpointCreated(Schema):
    seq: int
    epoch: int


class EffectIn(Schema):
    lease_id: Annotated[Text, Field(max_length=64)]
    epoch: Epoch
    kind: Annotated[Text, Field(min_length=1, max_length=100)]
    target: Annotated[Text, Field(min_length=1, max_length=500)]
    idempotency_key: Annotated[Text, Field(min_length=1, max_length=200)]
    payload: dict[str, Any] | None = None


class EffectOut(Schema):
    effect_id: str
    decision: Literal["authorized", "pending_approval"]
    epoch: int
    fencing_token: str | None = None


class OutcomeIn(Schema):
    outcome: Literal["applied", "failed", "unknown"]
    detail: Annotated[Text, Field(max_length=1000)] = ""


class OutcomeOut(Schema):
    effect_id: str
    outcome: str


class ReconcileIn(Schema):
    resolution: Literal["confirmed", "not_applied", "compensated"]
    note: Annotated[Text, Field(min_length=1, max_length=1000)]
    lease_id: Annotated[Text, Field(max_length=64)]
    epoch: Epoch


class ReconcileOut(Schema):
    effect_id: str
    resolution: str


class RecipientReportIn(Schema):
    work_key: Annotated[Text, Field(min_length=1, max_length=200)]
    epoch: Epoch | None = None
    high_water: Epoch | None = None
    reason: Literal[
        "stale_epoch", "forged", "expired", "unknown_key", "wrong_work", "malformed", "no_effect"
    ]
    recipient: Annotated[Text, Field(max_length=100)] | None = Field(
        default=None,
        description="ignored: a report is filed under the name of the recipient credential",
    )
    token: Annotated[Text, Field(max_length=4000)] | None = None
    detail: Annotated[Text, Field(max_length=1000)] = ""


class RecipientReportOut(Schema):
    report_id: str
    work_key: str
    current_epoch: int


class FencingCheckIn(Schema):
    fencing_token: Annotated[Text, Field(min_length=1, max_length=4096)]


class FencingCheckOut(Schema):
    valid: bool
    current_epoch: int | None
    code: str | None = None
    work_key: str | None = None
    epoch: int | None = None
    effect_id: str | None = None
    certainty: str | None = None
    expires_in_ms: int | None = None
