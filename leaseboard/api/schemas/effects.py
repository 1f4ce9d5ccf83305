"""Effects: proposing one, reporting its outcome, reconciling it; and asking the policy
why it would decide an effect as it does (policy explain).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import Field

from leaseboard.api.schemas.base import (
    Epoch,
    JsonObject,
    LeaseIdIn,
    Out,
    Text,
    UuidOut,
)
from leaseboard.domain.reconciliation import Decision, Outcome, PolicyDecision, Resolution

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
