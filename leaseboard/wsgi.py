"""The WSGI entry point (gunicorn leaseboard.wsgi:application)."""

import os

from django.core.wsgi import get_wsgi_application

from leaseboard.telemetry import telemetry_setup

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaseboard.settings")
# Before the handler loads settings.MIDDLEWARE: Django's instrumentation adds its middleware
# there. Off (and free) unless OTEL_* variables configure it.
telemetry_setup()
application = get_wsgi_application()


def warm_url_maps() -> None:
    """Import the site's URL map and the API lane's (and every view and schema they name)
    as the worker starts, not in its first request: measured 77 ms of a first acquire's
    115 ms, and 168 of a first /healthz's 185 ms, longer while a fleet restarts and many
    workers boot on the same cores, when an agent's 2 s request timeout is near
    (docs/deployment.md). Resolving a path touches no database, so this stays safe under
    gunicorn --preload, where a connection opened here would be shared by every worker.
    Importing the map imports what it includes (include() imports at once)."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.urls import get_resolver

    from leaseboard.api.lane import LANE_URLCONF

    for urlconf in (settings.ROOT_URLCONF, LANE_URLCONF):
        if not get_resolver(urlconf).url_patterns:  # imports the module and what it includes
            raise ImproperlyConfigured(f"{urlconf} has no URL patterns")


warm_url_maps()
