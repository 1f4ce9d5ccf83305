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
    path("settings/", include("leaseboard.policy.urls")),
    path("", include("leaseboard.dashboard.urls")),
]
