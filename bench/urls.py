"""The project's URLs plus the raw-SQL renew view that measures the framework's ceiling."""

from __future__ import annotations

from django.urls import path

from bench.raw_view import raw_renew
from leaseboard.urls import urlpatterns as project_urlpatterns

urlpatterns = [path("bench/raw-renew/<uuid:lease_id>", raw_renew), *project_urlpatterns]
