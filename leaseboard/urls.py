"""URL map: the v1 API, health, and (added by their apps) dashboard and metrics."""

from django.urls import include, path

from leaseboard.api.v1 import api
from leaseboard.sweeps.health import healthz
from leaseboard.sweeps.metrics import metrics

urlpatterns = [
    path("api/v1/", api.urls),
    path("healthz", healthz, name="healthz"),
    path("sandbox/", include("leaseboard.sandbox.urls")),
    path("metrics", metrics, name="metrics"),
    path("takeovers/", include("leaseboard.takeovers.urls")),
    path("", include("leaseboard.dashboard.urls")),
]

# Refusal and error pages inside the site's layout (leaseboard.web.errors).
handler403 = "leaseboard.web.errors.permission_denied"
handler404 = "leaseboard.web.errors.page_not_found"
handler500 = "leaseboard.web.errors.server_error"
