"""URL map: the v1 API, health, metrics, takeovers and the dashboard; the payments sandbox
only in the demo (LEASEBOARD_DEMO, which `dev.py demo` sets)."""

from django.conf import settings
from django.urls import include, path

from leaseboard.api.v1 import api
from leaseboard.policy.views import sso
from leaseboard.sweeps.health import healthz
from leaseboard.sweeps.metrics import metrics

urlpatterns = [
    path("api/v1/", api.urls),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("takeovers/", include("leaseboard.takeovers.urls")),
    path("settings/", include("leaseboard.policy.urls")),
    # OpenID Connect sign-in (leaseboard.web.sso): 404 unless an issuer is configured.
    path("oidc/authenticate/", sso.SignInStart.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", sso.SignInCallback.as_view(), name="oidc_authentication_callback"),
    path("oidc/logout/", sso.SignOut.as_view(), name="oidc_logout"),
]
if settings.LEASEBOARD_DEMO:
    # The sandbox takes anonymous payments and shows its ledger to anyone: demo only.
    urlpatterns.append(path("sandbox/", include("leaseboard.sandbox.urls")))
urlpatterns.append(path("", include("leaseboard.dashboard.urls")))

# Refusal and error pages inside the site's layout (leaseboard.web.errors); under /api/
# an error is a problem (internal_error, or unavailable when the database failed).
handler403 = "leaseboard.web.errors.permission_denied"
handler404 = "leaseboard.web.errors.page_not_found"
handler500 = "leaseboard.api.errors.server_error"
