"""API middleware: refuse oversized bodies and rate-limited callers before any view runs."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from leaseboard.api import ratelimit
from leaseboard.api.errors import problem


class ApiBodyLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/"):
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
        return self.get_response(request)


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
