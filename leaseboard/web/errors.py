"""The refusal and error pages (403, 404, 500) inside the site's layout. A 403 names what
was needed (the role, or the authority's reason); the 500 page reads nothing from the
database, which may be why it is shown."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseServerError
from django.template import loader

from leaseboard.web.pages import render_page


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    reason = str(exception) if exception is not None and str(exception) else ""
    return render_page(request, "403.html", {"reason": reason}, status=403)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return render_page(request, "404.html", {"path": request.path}, status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    # No request context: nothing here may touch the session or the database.
    return HttpResponseServerError(loader.get_template("500.html").render({}))
