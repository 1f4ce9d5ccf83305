"""The project's URLs plus the raw-SQL renew view inside the project's middleware stack."""

from __future__ import annotations

from django.urls import path

from bench.raw_view import raw_renew
from leaseboard.urls import urlpatterns as project_urlpatterns

urlpatterns = [path("bench/raw-renew/<uuid:lease_id>", raw_renew), *project_urlpatterns]
