"""Refuse oversized API bodies before any view or parser reads them."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

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
