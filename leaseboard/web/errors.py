"""The refusal and error pages (403, 404, 500, 503) inside the site's layout. A 403 names
what was needed (the role, or the authority's reason); the 500 and 503 pages read nothing
from the database, which may be why they are shown: the 503 page ("the database is
unreachable, nothing was changed") renders from a layout of its own that needs no user,
no session and no query.

With DEBUG on (the demo sets it) Django answers a 404 with its technical page, which lists
every URL of the site; `DebugNotFoundMiddleware` answers with the product's own instead."""

from __future__ import annotations

import sys
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseServerError
from django.template import loader
from django.urls import Resolver404, get_resolver
from django.urls.resolvers import URLResolver

from leaseboard.core.dbfaults import REASON_TEXT, database_unavailable, failure_seen
from leaseboard.web.pages import render_page


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    reason = str(exception) if exception is not None and str(exception) else ""
    return render_page(request, "403.html", {"reason": reason}, status=403)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return render_page(request, "404.html", {"path": request.path}, status=404)


def unavailable_page(request: HttpRequest, reason: str) -> HttpResponse:
    retry_s = max(1, round(settings.LEASEBOARD_DB_RETRY_AFTER_S))
    body = loader.get_template("503.html").render(
        {
            "reason": reason,
            "why": REASON_TEXT.get(reason, REASON_TEXT["unreachable"]),
            "unknown": reason == "commit_unknown",
            "retry_s": retry_s,
            "path": request.get_full_path() if request.method == "GET" else "",
        }
    )
    response = HttpResponse(body, status=503)
    response["Retry-After"] = str(retry_s)
    response["Cache-Control"] = "no-store"
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    # No request context: nothing here may touch the session or the database.
    exc = sys.exc_info()[1]
    if database_unavailable(exc):
        return unavailable_page(request, failure_seen(request, exc))
    return HttpResponseServerError(loader.get_template("500.html").render({}))


class DebugNotFoundMiddleware:
    """With DEBUG on, a path nothing serves, or a view's Http404, is answered by the URL
    map's own 404 handler (the product's page), not by Django's technical page. With DEBUG
    off Django calls that handler itself, so this is not used. Browser-only
    (leaseboard.api.lane), inside the session and authentication middleware: the page it
    renders knows who is signed in, and CommonMiddleware's slash redirect still applies."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        if not settings.DEBUG:
            raise MiddlewareNotUsed
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code != 404:
            return response
        try:
            self._resolver(request).resolve(request.path_info)
        except Resolver404 as exc:  # nothing serves this path: the 404 is Django's own page
            return self._not_found(request, exc)
        return response  # a view's deliberate 404 (an API problem, say): kept as it is

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, Http404):
            return self._not_found(request, exception)
        return None

    @staticmethod
    def _resolver(request: HttpRequest) -> URLResolver:
        return get_resolver(getattr(request, "urlconf", None))

    def _not_found(self, request: HttpRequest, exception: Exception) -> HttpResponse:
        handler: Callable[..., HttpResponse] = self._resolver(request).resolve_error_handler(404)
        return handler(request, exception=exception)
