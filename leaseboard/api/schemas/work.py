"""Work items: admitting one (with its timing overrides), reading it, completing it."""

from __future__ import annotations

from typing import Annotated

from ninja import Schema
from pydantic import ConfigDict, Field

from leaseboard.api.schemas.base import (
    Duration,
    Epoch,
    ErrorCode,
    JsonObject,
    LeaseIdIn,
    Out,
    Text,
    UuidOut,
    WorkKey,
)
from leaseboard.domain.certainty import Certainty
from leaseboard.domain.vocabulary import Admission, ExecutorKind, WorkStatus

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


# deliberate: declared fields, alike in shape only (each its own description).
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
