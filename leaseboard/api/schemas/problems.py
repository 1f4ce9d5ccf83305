"""Problem details (RFC 9457): the one error body every refusal is answered with."""

from __future__ import annotations

from typing import Literal

from ninja import Schema
from pydantic import ConfigDict, Field

from leaseboard.api.schemas.base import (
    ErrorCode,
    Out,
    RefusingDecision,
    UuidOut,
)
from leaseboard.domain.vocabulary import Admission, ExecutorKind, WorkStatus

# -- problems ----------------------------------------------------------------------------------


class FieldError(Out):
    loc: list[str]
    msg: str


# deliberate: declared fields (the RFC 9457 members and ours), alike in shape only.
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
