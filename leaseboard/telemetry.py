"""OpenTelemetry for the Leaseboard server: off unless configured by the standard OTEL_*
variables (leaseboard_client.telemetry says which, and docs/mcp.md lists them).

Configured, it installs the tracer provider (OTLP over HTTP, or console) and the
instrumentation packages — Django (a server span per request, continuing the caller's
`traceparent`), Celery (a span per task, the trace carried from the enqueue), httpx (the
recipient webhooks) — before the WSGI handler loads its middleware. The decisions' own spans
are leaseboard.core.tracing's. Called by leaseboard.wsgi and .asgi before they build their
handler, and by each Celery worker process (leaseboard.celery); once per process.
"""

from __future__ import annotations

import logging

from leaseboard_client.telemetry import TelemetryError, tracer_provider_from_env

log = logging.getLogger(__name__)
SERVICE_NAME = "leaseboard"
_installed = False


def telemetry_setup() -> bool:
    """Install tracing if the environment configures it; True if it is on. A configuration
    that cannot work fails the start (ImproperlyConfigured), like any bad setting."""
    global _installed
    if _installed:
        return True
    try:
        provider = tracer_provider_from_env(SERVICE_NAME)
    except TelemetryError as exc:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"OpenTelemetry: {exc}") from None
    if provider is None:
        return False
    from django.apps import apps

    if not apps.ready:  # the instrumentation reads the settings and the app registry
        import django

        django.setup()
    from opentelemetry import trace
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    trace.set_tracer_provider(provider)
    DjangoInstrumentor().instrument(tracer_provider=provider)
    CeleryInstrumentor().instrument(tracer_provider=provider)
    HTTPXClientInstrumentor().instrument(tracer_provider=provider)
    _installed = True
    log.info("OpenTelemetry tracing on (service %s)", SERVICE_NAME)
    return True
