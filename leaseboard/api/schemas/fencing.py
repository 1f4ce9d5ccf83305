"""Fencing and recipients: the published signing keys (JWKS), a recipient's report of a
refused token, and the online check of a token's standing.
"""

from __future__ import annotations

from typing import Annotated, Literal

from ninja import Schema
from pydantic import Field

from leaseboard.api.schemas.base import (
    Epoch,
    JsonObject,
    Out,
    Text,
    UuidOut,
)

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


# deliberate: declared fields, alike in shape only (each its own description).
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
