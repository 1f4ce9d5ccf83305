"""The one place that maps refusals to HTTP: RFC 9457 problem details with a stable code."""

from __future__ import annotations

import logging
import re
import sys
import uuid
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from leaseboard.core.dbfaults import REASON_TEXT, database_unavailable, failure_seen
from leaseboard.domain.errors import InternalError, LeaseboardError, Unavailable

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
    "internal_error": 500,
    "unavailable": 503,
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


# A caller's own X-Request-Id is kept when it is a plain token; otherwise one is made.
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def request_id(request: HttpRequest | None) -> str:
    given = request.META.get("HTTP_X_REQUEST_ID", "") if request is not None else ""
    return given if REQUEST_ID.fullmatch(given) else uuid.uuid4().hex


def unavailable(
    request: HttpRequest | None,
    exc: BaseException | None = None,
    *,
    reason: str = "",
    quiet: bool = False,
) -> JsonResponse:
    """503 `unavailable` with Retry-After: the database could not answer this request, so
    it changed nothing (but for a commit cut in flight, which says so); retry later.
    `quiet`: answered by the breaker without trying, already logged when it opened."""
    reason = reason or (failure_seen(request, exc) if request is not None else "unreachable")
    rid = request_id(request)
    (log.debug if quiet else log.warning)(
        "503 unavailable (%s) %s %s request_id=%s%s",
        reason,
        getattr(request, "method", ""),
        getattr(request, "path", ""),
        rid,
        f": {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}" if exc else "",
    )
    nothing = "" if reason == "commit_unknown" else "; nothing was changed by this request"
    return _server_problem(
        request,
        Unavailable,
        rid,
        f"{REASON_TEXT[reason]}{nothing}: retry after the Retry-After seconds",
        reason=reason,
        retry_after_ms=int(settings.LEASEBOARD_DB_RETRY_AFTER_S * 1000),
    )


def internal_error(request: HttpRequest | None, exc: BaseException | None) -> JsonResponse:
    """500 `internal_error`: an unexpected error, logged with its traceback under the
    request id the answer carries, never an HTML page."""
    rid = request_id(request)
    log.error(
        "internal error %s %s request_id=%s",
        getattr(request, "method", ""),
        getattr(request, "path", ""),
        rid,
        exc_info=(type(exc), exc, exc.__traceback__) if exc is not None else None,
    )
    return _server_problem(
        request, InternalError, rid, f"an unexpected error; it is logged under request id {rid}"
    )


def _server_problem(
    request: HttpRequest | None,
    error: type[LeaseboardError],
    rid: str,
    detail: str,
    **extra: Any,
) -> JsonResponse:
    """A 503 or 500 the log holds under request id `rid`: in the body and X-Request-Id."""
    response = problem(
        request, code=error.code, title=error.title, detail=detail, request_id=rid, **extra
    )
    response["X-Request-Id"] = rid
    return response


def unexpected(request: HttpRequest | None, exc: BaseException | None) -> JsonResponse:
    if database_unavailable(exc):
        return unavailable(request, exc)
    return internal_error(request, exc)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500 of both URL maps: what escaped a view or a middleware, answered as a
    problem under /api/, as a page elsewhere (leaseboard.web.errors)."""
    if request.path_info.startswith("/api/"):
        return unexpected(request, sys.exc_info()[1])
    from leaseboard.web.errors import server_error as page

    return page(request)


def problem_from_error(request: HttpRequest | None, exc: LeaseboardError) -> JsonResponse:
    # deliberate: the error's members by name, one a line; alike in shape only.
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

    @api.exception_handler(PermissionDenied)
    def _denied(request: HttpRequest, exc: PermissionDenied):  # type: ignore[no-untyped-def]
        return problem(request, code="forbidden", title="Forbidden", detail=str(exc) or "forbidden")

    # Anything else: the database not answering (503, retry) or a fault of ours (500).
    @api.exception_handler(Exception)
    def _unexpected(request: HttpRequest, exc: Exception):  # type: ignore[no-untyped-def]
        return unexpected(request, exc)
