"""Everything under /api/ answers problem details: oversized bodies are refused before any
view or parser reads them (413), and a path or method no operation serves is a 404 or 405
problem instead of Django's HTML page."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from leaseboard.api.errors import PROBLEM_JSON, problem


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
