"""API middleware: everything under /api/ answers problem details. Oversized bodies and
rate-limited callers are refused before any view runs (413, 429), and a path or method no
operation serves is a 404 or 405 problem instead of Django's HTML page. The database
guard (before any view, for agents and browsers alike) gives every request its deadline
on the database and answers 503 at once while the database is known to be unreachable
(docs/design.md §14)."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.http import HttpRequest, HttpResponse

from leaseboard.api import ratelimit
from leaseboard.api.errors import PROBLEM_JSON, problem, unavailable
from leaseboard.core.dbfaults import breaker, discard_if_suspect
from leaseboard.core.deadline import watchdog
from leaseboard.web.errors import unavailable_page

# They read the database themselves and say what failed: never short-circuited.
SELF_CHECKING = ("/healthz", "/metrics")


class DatabaseGuardMiddleware:
    """Per request: LEASEBOARD_API_DEADLINE_MS under /api/ (and for the health check,
    which a load balancer times out), LEASEBOARD_PAGE_DEADLINE_MS for pages; past it the
    watchdog (leaseboard.core.deadline) cuts the request's database connection. While the
    breaker is open (a connection-level failure within LEASEBOARD_DB_RETRY_AFTER_S), the
    request is answered 503 without waiting on the database. A connection that failed or
    was cut is closed here, never handed to the next request, and one opened before the
    last failure is closed before this request can use it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path_info
        api = path.startswith("/api/")
        if path not in SELF_CHECKING and not breaker.allow():
            if api:
                return unavailable(request, reason="unreachable", quiet=True)
            return unavailable_page(request, "unreachable")
        db = connections[DEFAULT_DB_ALIAS]
        discard_if_suspect(db)
        ms = (
            settings.LEASEBOARD_API_DEADLINE_MS
            if api or path in SELF_CHECKING
            else settings.LEASEBOARD_PAGE_DEADLINE_MS
        )
        if not ms or db.vendor != "postgresql":
            return self.get_response(request)
        deadline = watchdog.enter(ms / 1000, db)
        request.lb_deadline = deadline  # type: ignore[attr-defined]
        try:
            return self.get_response(request)
        finally:
            watchdog.leave(deadline)
            if deadline.fired or deadline.broken:
                # Closed, not pinged: a health check on a frozen server would hang here.
                db.close()
            elif db.connection is not None:
                breaker.succeeded()


class ApiBodyLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith("/api/"):
            return self.get_response(request)
        raw = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw)
        except ValueError:
            length = -1
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if length < 0 or length > limit:
            return problem(
                request,
                code="validation_error",
                title="Request body too large",
                detail=f"the body is limited to {limit} bytes",
                status=413,
            )
        response = self.get_response(request)
        if response.status_code in (404, 405) and not response.get("Content-Type", "").startswith(
            PROBLEM_JSON
        ):
            return unrouted(request, response)
        return response


def unrouted(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """The problem for a path no operation serves, or a method it does not allow."""
    if response.status_code == 405:
        allowed = response.get("Allow", "")
        answer = problem(
            request,
            code="validation_error",
            title="Method not allowed",
            detail=f"{request.method} is not allowed here; allowed: {allowed or 'none'}",
            status=405,
        )
        answer["Allow"] = allowed
        return answer
    return problem(
        request,
        code="not_found",
        title="No such API path",
        detail="no operation serves this path; the schema is at /api/v1/openapi.json",
        status=404,
    )


class ApiRateLimitMiddleware:
    """429 `rate_limited` with Retry-After once a credential or an address is over its
    limit (leaseboard/api/ratelimit.py says what is counted where)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith("/api/") or not settings.LEASEBOARD_RATE_LIMIT_ENABLED:
            return self.get_response(request)
        limiter = ratelimit.limiter()
        credential = ratelimit.bearer_credential(request)
        address = ratelimit.client_address(request) or "unknown"
        verdict = limiter.admit(credential=credential, address=address, path=request.path)
        if not verdict.allowed:
            return _rate_limited(request, verdict)
        response = self.get_response(request)
        if credential is not None and response.status_code == 401:
            verdict = limiter.refused_credential(address=address)
            if not verdict.allowed:
                return _rate_limited(request, verdict)
        return response


def _rate_limited(request: HttpRequest, verdict: ratelimit.Verdict) -> HttpResponse:
    who = "this address" if verdict.limit == "address" else "this credential"
    return problem(
        request,
        code="rate_limited",
        title="Too many requests",
        detail=f"{who} is over its request limit; retry after the Retry-After seconds",
        limit=verdict.limit,
        retry_after_ms=int(verdict.retry_after_s * 1000),
    )
