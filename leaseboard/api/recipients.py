"""The recipients' side of the v1 API (docs/design.md §13): the public keys that verify
fencing tokens offline, the refusal reports a recipient files, and the online fencing check
(Chubby's CheckSequencer). A router that leaseboard/api/v1.py mounts at the API's root with
the recipient-or-agent credential (`v1.RECIPIENT_OR_AGENT`), so every URL, operation id and
URL name is the one the API serves. Thin: parse, call a service, shape JSON."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Status
from ninja.security import HttpBearer

from leaseboard.api import schemas as s
from leaseboard.api.openapi import problems
from leaseboard.core.authority import Actor
from leaseboard.core.models import Recipient
from leaseboard.core.services import recipients
from leaseboard.core.services.fencing import fencing_public_keys
from leaseboard.core.services.fencing_check import fencing_check
from leaseboard.core.services.recipients import recipient_for_token
from leaseboard.domain import fencing
from leaseboard.domain.errors import ValidationFailed

FENCING, RECIPIENTS = ["fencing"], ["recipients"]


class RecipientBearer(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Recipient | None:
        return recipient_for_token(token)


def _speaker(request: HttpRequest) -> Actor:
    """The actor behind a recipient endpoint's credential: a recipient, or an agent."""
    auth = request.auth  # type: ignore[attr-defined]
    return Actor.recipient(auth) if isinstance(auth, Recipient) else Actor.agent(auth)


router = Router()


# deliberate: each operation declares its whole contract at its handler, as in api/v1.py.
@router.get(
    "/fencing/keys",
    auth=None,
    response={200: s.Jwks},
    operation_id="get_fencing_keys",
    tags=FENCING,
    openapi_extra=problems(),
)
def fencing_keys(request: HttpRequest) -> dict[str, Any]:
    """The Ed25519 public keys (JWKS) that verify fencing tokens offline."""
    return fencing.jwks(fencing_public_keys())


@router.post(
    "/recipient-reports",
    response={201: s.RecipientReportOut},
    operation_id="file_recipient_report",
    tags=RECIPIENTS,
    openapi_extra=problems(400, 401, 403, 404),
)
def recipient_report(request: HttpRequest, body: s.RecipientReportIn):  # type: ignore[no-untyped-def]
    """A stale, forged, expired or effect-less token a recipient refused (recipient
    credential only)."""
    effect = recipients.recipient_report_record(
        actor=_speaker(request),
        work_key=body.work_key,
        reason=body.reason,
        epoch=body.epoch,
        high_water=body.high_water,
        detail=body.detail,
        token=body.token,
    )
    return Status(
        201,
        {
            "report_id": str(effect.id),
            "work_key": body.work_key,
            "current_epoch": effect.current_epoch,
        },
    )


@router.post(
    "/fencing/check",
    response={200: s.FencingCheckOut},
    operation_id="check_fencing",
    tags=RECIPIENTS,
    openapi_extra=problems(400, 401, 403),
)
def check_fencing(request: HttpRequest, body: s.FencingCheckIn) -> dict[str, Any]:
    """Is the standing this token proves current right now, and (given the request's
    `digest`, or its `kind`, `target` and `payload`) was it decided on exactly this request?
    (Chubby's CheckSequencer; recipient credential only.) A content mismatch answers
    `payload_mismatch` and is recorded as the recipient's refusal."""
    digest = body.digest
    if body.kind is not None or body.target is not None or body.payload is not None:
        if body.kind is None or body.target is None or digest is not None:
            raise ValidationFailed(
                "send the request's digest, or its kind and target (and payload)", param="digest"
            )
        digest = fencing.content_digest(body.kind, body.target, body.payload)
    return fencing_check(
        actor=_speaker(request), token=body.fencing_token, digest=digest, queue=body.queue
    ).__dict__
