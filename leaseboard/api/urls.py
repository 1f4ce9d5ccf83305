"""The agents' lane's URL map (leaseboard/api/lane.py): the API alone, and refusals as
problem details, since no page of the site (which needs the signed-in user) can render on
a lane that has none."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path

from leaseboard.api.errors import problem
from leaseboard.api.middleware import unrouted
from leaseboard.api.v1 import api


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return unrouted(request, HttpResponse(status=404))


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return problem(request, code="forbidden", title="Forbidden", detail=str(exception or ""))


urlpatterns = [path("api/v1/", api.urls)]
handler403 = "leaseboard.api.urls.permission_denied"
handler404 = "leaseboard.api.urls.not_found"
handler500 = "leaseboard.api.errors.server_error"  # problem+json, never the HTML page
