"""The one place that maps refusals to HTTP: RFC 9457 problem details with a stable code."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.http import Http404, HttpRequest, JsonResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from leaseboard.domain.errors import LeaseboardError

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"

STATUS_BY_CODE: dict[str, int] = {
    "validation_error": 400,
    "unauthenticated": 401,
    "forbidden": 403,
    "not_holder": 403,
    "policy_denied": 403,
    "queue_not_allowed": 403,
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


def _param(loc: Sequence[str]) -> str:
    """The request field an error is about: ninja's loc without its (body|path, name) head."""
    parts = list(loc)
    if parts[:1] in (["body"], ["path"], ["query"]):
        parts = parts[1:]
        if parts[:1] == ["body"]:
            parts = parts[1:]
    return ".".join(parts)


def problem_handlers_install(api: NinjaAPI) -> None:
    """Every refusal the API raises, answered as an RFC 9457 problem with a stable code."""

    @api.exception_handler(LeaseboardError)
    def _leaseboard_error(request: HttpRequest, exc: LeaseboardError):  # type: ignore[no-untyped-def]
        return problem_from_error(request, exc)

    @api.exception_handler(ValidationError)
    def _validation_error(request: HttpRequest, exc: ValidationError):  # type: ignore[no-untyped-def]
        errors = [
            {"loc": [str(p) for p in e.get("loc", [])], "msg": str(e.get("msg", ""))}
            for e in exc.errors
        ]
        first = errors[0] if errors else {"loc": [], "msg": "invalid"}
        return problem(
            request,
            code="validation_error",
            title="The request is not valid",
            detail=f"{'.'.join(first['loc'])}: {first['msg']}",
            status=400,
            param=_param(first["loc"]) or None,
            errors=errors,
        )

    @api.exception_handler(AuthenticationError)
    def _auth_error(request: HttpRequest, exc: AuthenticationError):  # type: ignore[no-untyped-def]
        return problem(
            request,
            code="unauthenticated",
            title="Missing or invalid credentials",
            detail="send an agent token as 'Authorization: Bearer <token>'",
            status=401,
        )

    @api.exception_handler(HttpError)
    def _http_error(request: HttpRequest, exc: HttpError):  # type: ignore[no-untyped-def]
        codes = {
            400: "validation_error",
            401: "unauthenticated",
            403: "forbidden",
            404: "not_found",
            429: "rate_limited",
        }
        code = codes.get(exc.status_code, "validation_error")
        return problem(request, code=code, title=str(exc), detail=str(exc), status=exc.status_code)

    @api.exception_handler(Http404)
    def _not_found(request: HttpRequest, exc: Http404):  # type: ignore[no-untyped-def]
        return problem(
            request, code="not_found", title="No such object", detail=str(exc) or "not found"
        )
