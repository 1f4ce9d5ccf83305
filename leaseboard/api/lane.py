"""The agents' lane: a request under /api/ that carries a bearer token skips the browser's
middleware (sessions, CSRF, the signed-in user, messages, htmx, clickjacking, CSP, static
files) and runs only the database guard, security headers, the body
limit and the rate limits. Bearer requests never read a cookie, render a page or need a
user, so that work was pure overhead on the agents' hot paths (docs/benchmarks.md).

Built from Django's documented middleware interface alone, so a Django upgrade cannot
change it under us: `ApiLaneMiddleware` (first in MIDDLEWARE) marks the request and points
it at the API's own URL map (leaseboard/api/urls.py: the API alone, a 403 or 404 as a
problem, as no page of the site can render without the signed-in user), and every
browser-only entry of MIDDLEWARE is wrapped in `BrowserOnly`, which passes a marked request
straight on. One chain, so views, exception handling and the 4xx/5xx log lines are the
same for both kinds of request. Anything else under /api/ (the Swagger page, the schema, a
request with no credential) takes the full stack.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string

LANE_URLCONF = "leaseboard.api.urls"  # the API's URLs alone, refusals as problems
MARK = "lb_agent_lane"  # the request attribute BrowserOnly reads

GetResponse = Callable[[HttpRequest], HttpResponse]


def is_agent_request(request: HttpRequest) -> bool:
    """Under /api/ with `Authorization: Bearer …` (any case, as HttpBearer reads it)."""
    return (
        request.path_info.startswith("/api/")
        and request.META.get("HTTP_AUTHORIZATION", "")[:7].lower() == "bearer "
    )


def on_lane(request: HttpRequest) -> bool:
    return request.__dict__.get(MARK, False)


class ApiLaneMiddleware:
    """Marks a bearer request under /api/ for the lane (LEASEBOARD_API_LANE=false: never)."""

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response
        self.enabled = settings.LEASEBOARD_API_LANE

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if self.enabled and is_agent_request(request):
            setattr(request, MARK, True)
            request.urlconf = LANE_URLCONF  # type: ignore[attr-defined]
        return self.get_response(request)


class BrowserOnly:
    """Runs the middleware at `wraps` for every request except one on the lane, which goes
    straight to the next entry. Its hooks (process_view, process_exception,
    process_template_response) exist on the wrapper only where the wrapped middleware has
    them, and skip a lane request the same way, so Django collects exactly the same hooks."""

    wraps: str = ""

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response
        # MiddlewareNotUsed from the wrapped factory propagates: Django drops the entry.
        self.inner = import_string(self.wraps)(get_response)
        for hook in ("process_view", "process_exception", "process_template_response"):
            if hasattr(self.inner, hook):
                setattr(self, hook, _browser_hook(getattr(self.inner, hook)))

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if on_lane(request):
            return self.get_response(request)
        return self.inner(request)


def _browser_hook(hook: Callable[..., Any]) -> Callable[..., Any]:
    def call(request: HttpRequest, *args: Any) -> Any:
        return None if on_lane(request) else hook(request, *args)

    return call


# The browser-only entries of settings.MIDDLEWARE, each named after the middleware it wraps.
# deliberate: one two-line class an entry, alike in shape: MIDDLEWARE names each entry by
# import path, so each needs a name of its own that says what it wraps; a loop over a
# table of paths writing module globals would hide them from readers, grep and mypy.
class CSPMiddleware(BrowserOnly):
    wraps = "csp.middleware.CSPMiddleware"


class WhiteNoiseMiddleware(BrowserOnly):
    wraps = "whitenoise.middleware.WhiteNoiseMiddleware"


class SessionMiddleware(BrowserOnly):
    wraps = "django.contrib.sessions.middleware.SessionMiddleware"


class CommonMiddleware(BrowserOnly):
    wraps = "django.middleware.common.CommonMiddleware"


class CsrfViewMiddleware(BrowserOnly):
    wraps = "django.middleware.csrf.CsrfViewMiddleware"


class AuthenticationMiddleware(BrowserOnly):
    wraps = "django.contrib.auth.middleware.AuthenticationMiddleware"


class MessageMiddleware(BrowserOnly):
    wraps = "django.contrib.messages.middleware.MessageMiddleware"


class XFrameOptionsMiddleware(BrowserOnly):
    wraps = "django.middleware.clickjacking.XFrameOptionsMiddleware"


class HtmxMiddleware(BrowserOnly):
    wraps = "django_htmx.middleware.HtmxMiddleware"


class DebugNotFoundMiddleware(BrowserOnly):
    # DEBUG only; the lane's URL map answers its 404s as problems already.
    wraps = "leaseboard.web.errors.DebugNotFoundMiddleware"
