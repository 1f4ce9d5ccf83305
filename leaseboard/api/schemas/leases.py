"""Leases: acquire, renew (one or a batch), release, and checkpoints under a lease."""

from __future__ import annotations

from typing import Annotated, Any

from ninja import Schema
from pydantic import BaseModel, Field

from leaseboard.api.schemas.base import (
    Epoch,
    ErrorCode,
    JsonDocument,
    Millis,
    Out,
    Text,
    UuidOut,
)
from leaseboard.domain.certainty import Certainty

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


# deliberate: the wire form of leases.renewals.BatchResult, declared in the API's own contract
# (its code an ErrorCode), so the document does not change when the service's result does.
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
