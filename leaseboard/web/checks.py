"""Django's deploy checks for CSRF and clickjacking protection, read through the API lane's
wrappers: `leaseboard.api.lane.CsrfViewMiddleware` runs Django's own
`django.middleware.csrf.CsrfViewMiddleware` for every browser request (docs/design.md §9),
but Django's security.W002 and security.W003 look for the latter's dotted path in
MIDDLEWARE and cannot see through a wrapper. settings.SILENCED_SYSTEM_CHECKS silences
those two, and these checks say the same thing about the middleware as it really runs."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.utils.module_loading import import_string

CSRF = "django.middleware.csrf.CsrfViewMiddleware"
XFRAME = "django.middleware.clickjacking.XFrameOptionsMiddleware"


def middleware_unwrapped() -> list[str]:
    """MIDDLEWARE with each lane wrapper replaced by the middleware it runs for browsers."""
    paths = []
    for path in settings.MIDDLEWARE:
        wraps = getattr(import_string(path), "wraps", "") if path.startswith("leaseboard.") else ""
        paths.append(wraps or path)
    return paths


@checks.register(checks.Tags.security, deploy=True)
def browser_protections(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """leaseboard.W002/W003: Django's W002/W003 on the middleware as it runs."""
    running = middleware_unwrapped()
    found: list[checks.CheckMessage] = []
    if XFRAME not in running:
        found.append(
            checks.Warning(
                f"{XFRAME} does not run for browser requests: pages have no X-Frame-Options.",
                id="leaseboard.W002",
            )
        )
    if CSRF not in running:
        found.append(
            checks.Warning(
                f"{CSRF} does not run for browser requests: forms have no CSRF protection.",
                id="leaseboard.W003",
            )
        )
    return found
