"""The agents' lane: a request under /api/ that carries a bearer token skips the browser's
middleware (sessions, CSRF, the signed-in user, messages, htmx, clickjacking, CSP, the
sign-in throttle) and runs only `API_LANE_MIDDLEWARE`: the database guard, security
headers, the body limit and the rate limits. Bearer requests never read a cookie, render a
page or need a user, so that work was pure overhead on the agents' hot paths
(docs/benchmarks.md).

`ApiLaneMiddleware` goes first in MIDDLEWARE. It builds a second middleware chain around
Django's own URL resolution and view call, so views, exception handling and the 4xx/5xx
log lines are the same on both chains; its URL map (leaseboard/api/urls.py) holds the API
alone and answers a 403 or 404 as a problem, as no page of the site can render without
the signed-in user. Anything else under /api/ (the
Swagger page, the schema, a request with no credential) takes the full stack.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.handlers.base import BaseHandler
from django.core.handlers.exception import convert_exception_to_response
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string

API_LANE_MIDDLEWARE = (
    "leaseboard.api.middleware.DatabaseGuardMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "leaseboard.api.middleware.ApiBodyLimitMiddleware",
    "leaseboard.api.middleware.ApiRateLimitMiddleware",
)

LANE_URLCONF = "leaseboard.api.urls"  # the API's URLs alone, refusals as problems


def is_agent_request(request: HttpRequest) -> bool:
    """Under /api/ with `Authorization: Bearer …` (any case, as HttpBearer reads it)."""
    return (
        request.path_info.startswith("/api/")
        and request.META.get("HTTP_AUTHORIZATION", "")[:7].lower() == "bearer "
    )


class _LaneHandler(BaseHandler):
    """Django's handler with the lane's middleware instead of settings.MIDDLEWARE."""

    def load_middleware(self, is_async: bool = False) -> None:
        self._view_middleware: list[Any] = []
        self._template_response_middleware: list[Any] = []
        self._exception_middleware: list[Any] = []
        handler = convert_exception_to_response(self._get_response)  # type: ignore[attr-defined]
        for path in reversed(API_LANE_MIDDLEWARE):
            middleware = import_string(path)(handler)
            if hasattr(middleware, "process_view"):
                self._view_middleware.insert(0, middleware.process_view)
            if hasattr(middleware, "process_template_response"):
                self._template_response_middleware.append(middleware.process_template_response)
            if hasattr(middleware, "process_exception"):
                self._exception_middleware.append(middleware.process_exception)
            handler = convert_exception_to_response(middleware)
        self._middleware_chain = handler


class ApiLaneMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        lane = _LaneHandler()
        lane.load_middleware()
        self.lane = lane._middleware_chain
        self.enabled = settings.LEASEBOARD_API_LANE

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if self.enabled and is_agent_request(request):
            request.urlconf = LANE_URLCONF  # type: ignore[attr-defined]
            return self.lane(request)  # type: ignore[return-value]
        return self.get_response(request)
