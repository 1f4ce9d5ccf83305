"""The refusal and error pages (403, 404, 500, 503) inside the site's layout. A 403 names
what was needed (the role, or the authority's reason); the 500 and 503 pages read nothing
from the database, which may be why they are shown: the 503 page ("the database is
unreachable, nothing was changed") renders from a layout of its own that needs no user,
no session and no query."""

from __future__ import annotations

import sys

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseServerError
from django.template import loader

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
