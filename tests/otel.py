"""OpenTelemetry in tests: `in_memory_tracing()` installs a tracer provider whose spans go
to the SDK's in-memory exporter for the block, then puts the process's globals back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once


@contextmanager
def global_tracer_provider(provider: TracerProvider) -> Iterator[None]:
    """Install `provider` as the process's tracer provider for the block, then put back
    what was there: OpenTelemetry allows one per process, so this resets its globals the
    way its own tests do (opentelemetry-test-utils' reset_trace_globals)."""
    saved = (trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE)
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    trace.set_tracer_provider(provider)
    try:
        yield
    finally:
        trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = saved
        # Tracers handed out meanwhile keep pointing at it: shut down, it records nothing.
        provider.shutdown()


@contextmanager
def in_memory_tracing() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with global_tracer_provider(provider):
        yield provider, exporter


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]
