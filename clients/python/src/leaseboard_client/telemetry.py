"""OpenTelemetry for the processes this distribution runs (the MCP gateway; the Leaseboard
server builds its provider here too): off unless configured, by the standard variables.

Tracing is on when `OTEL_TRACES_EXPORTER` is set (otlp, console, none; a comma list), or an
OTLP endpoint is (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), and
`OTEL_SDK_DISABLED` is not true. The exporter reads its own variables (endpoint, headers,
timeout); OTLP goes over HTTP/protobuf (`opentelemetry-exporter-otlp-proto-http`), console
spans go to stderr (stdout is the MCP channel). `OTEL_SERVICE_NAME` and
`OTEL_RESOURCE_ATTRIBUTES` name the service. Needs the `[otel]` extra.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

SWITCHES = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
)


class TelemetryError(RuntimeError):
    """Tracing is configured but cannot be set up (a missing package, a bad value)."""


def tracing_configured(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(env.get(name, "").strip() for name in SWITCHES)


def exporter_names(environ: Mapping[str, str]) -> list[str]:
    raw = environ.get("OTEL_TRACES_EXPORTER", "").strip() or "otlp"
    names = [n.strip().lower() for n in raw.split(",") if n.strip()]
    unknown = sorted(set(names) - {"otlp", "console", "none"})
    if unknown:
        raise TelemetryError(f"OTEL_TRACES_EXPORTER: unknown exporter {unknown[0]!r}")
    return [n for n in names if n != "none"]


def tracer_provider_from_env(
    service_name: str, environ: Mapping[str, str] | None = None
) -> Any | None:
    """A TracerProvider with a batch processor per configured exporter, or None when
    tracing is not configured."""
    env = os.environ if environ is None else environ
    if not tracing_configured(env):
        return None
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError as exc:
        raise TelemetryError(
            f"tracing is configured but OpenTelemetry is not installed ({exc.name}): "
            "pip install 'leaseboard-client[otel]'"
        ) from None
    protocol = env.get(
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
    )
    if protocol and protocol != "http/protobuf":
        raise TelemetryError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: this build exports over http/protobuf"
        )
    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES over our default.
    resource = Resource.create({SERVICE_NAME: env.get("OTEL_SERVICE_NAME") or service_name})
    provider = TracerProvider(resource=resource)
    for name in exporter_names(env):
        if name == "console":
            exporter: Any = ConsoleSpanExporter(out=sys.stderr)
        else:
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )
            except ImportError:
                raise TelemetryError(
                    "OTLP export needs opentelemetry-exporter-otlp-proto-http: "
                    "pip install 'leaseboard-client[otel]'"
                ) from None
            exporter = OTLPSpanExporter()
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def tracing_setup(service_name: str, *, instrument_httpx: bool = True) -> bool:
    """Install the provider from the environment as the global one and instrument httpx
    (the SDK's transport); False, changing nothing, when tracing is not configured."""
    provider = tracer_provider_from_env(service_name)
    if provider is None:
        return False
    from opentelemetry import trace

    trace.set_tracer_provider(provider)
    if instrument_httpx:
        try:
            from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
        except ImportError:
            raise TelemetryError(
                "tracing needs opentelemetry-instrumentation-httpx: "
                "pip install 'leaseboard-client[otel]'"
            ) from None
        HTTPXClientInstrumentor().instrument(tracer_provider=provider)
    return True
