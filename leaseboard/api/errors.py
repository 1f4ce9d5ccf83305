"""The one place that maps refusals to HTTP: RFC 9457 problem details with a stable code."""

from __future__ import annotations

import logging
from typing import Any

from django.http import HttpRequest, JsonResponse

from leaseboard.domain.errors import LeaseboardError

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"

STATUS_BY_CODE: dict[str, int] = {
    "validation_error": 400,
    "unauthenticated": 401,
    "forbidden": 403,
    "not_holder": 403,
    "policy_denied": 403,
    "not_found": 404,
    "rate_limited": 429,
}
DEFAULT_CONFLICT = 409  # every lease, admission and authorization refusal
# RFC 9457's own members: a refusal's extra named like one is sent as work_<name>
# (WorkNotAdmitted's `status` of the work item must not become the HTTP status).
RESERVED = frozenset({"type", "title", "status", "detail", "code", "instance"})


def problem(
    request: HttpRequest | None,
    *,
    code: str,
    title: str,
    detail: str,
    status: int | None = None,
    **extra: Any,
) -> JsonResponse:
    status = status or STATUS_BY_CODE.get(code, DEFAULT_CONFLICT)
    body: dict[str, Any] = {
        "type": f"urn:leaseboard:problem:{code}",
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
    }
    if request is not None:
        body["instance"] = request.path
    body.update({k: v for k, v in extra.items() if v is not None})
    response = JsonResponse(body, status=status, content_type=PROBLEM_JSON)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="leaseboard"'
    if "retry_after_ms" in extra:
        response["Retry-After"] = str(max(1, -(-int(extra["retry_after_ms"]) // 1000)))
    return response


def problem_from_error(request: HttpRequest | None, exc: LeaseboardError) -> JsonResponse:
    return problem(
        request,
        code=exc.code,
        title=exc.title,
        detail=exc.detail,
        decision=exc.decision,
        **{(f"work_{k}" if k in RESERVED else k): v for k, v in exc.extra.items()},
    )
