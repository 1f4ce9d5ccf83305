"""Decisions as OpenTelemetry spans, and the trace id a record keeps.

`decision_span("leaseboard.effect.propose", work_key=..., epoch=...)` wraps one decision of
the three (admission, lease, commit-time authorization) and carries `leaseboard.*`
attributes: work_key, epoch, generation (where the lease has one), decision, code,
policy_rule. A LeaseboardError leaving it is a refusal (decision "refused", its code).

Off means free: with no tracer provider installed (leaseboard/telemetry.py installs one only
when OTEL_* variables configure it) `decision_span` yields a do-nothing stand-in after one
global read, and `current_trace_id()` answers "" — the renew, acquire and effect paths pay
well under a microsecond (bench/hotpaths.py, docs/benchmarks.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from opentelemetry import trace
from opentelemetry.trace import ProxyTracerProvider, format_trace_id

from leaseboard.domain.errors import LeaseboardError

PREFIX = "leaseboard."
P = ParamSpec("P")
R = TypeVar("R")


class Decision:
    """What a decision span's body records; attributes named without the prefix."""

    __slots__ = ("span",)

    def __init__(self, span: Any) -> None:
        self.span = span

    @property
    def on(self) -> bool:
        """Recording: worth computing attributes that cost a lookup."""
        return self.span is not None

    def note(self, **attributes: Any) -> None:
        if self.span is None:
            return
        self.span.set_attributes(
            {PREFIX + k: v for k, v in attributes.items() if v is not None and v != ""}
        )

    def lease(self, lease: Any) -> None:
        """The lease it was decided under: epoch, and generation where the lease has one."""
        if self.span is None or lease is None:
            return
        self.note(
            epoch=lease.epoch, lease_id=str(lease.id), generation=getattr(lease, "generation", None)
        )


_OFF = Decision(None)


def tracing_on() -> bool:
    """Is a real tracer provider installed (by telemetry_setup, or by an agent such as
    opentelemetry-instrument)? One global read."""
    return not isinstance(trace.get_tracer_provider(), ProxyTracerProvider)


@contextmanager
def decision_span(name: str, **attributes: Any) -> Iterator[Decision]:
    if not tracing_on():
        yield _OFF
        return
    # The tracer of the provider installed now (a module-level one would stay bound to the
    # first provider it met).
    tracer = trace.get_tracer_provider().get_tracer("leaseboard")
    with tracer.start_as_current_span(
        name, record_exception=False, set_status_on_exception=False
    ) as span:
        decision = Decision(span)
        decision.note(**attributes)
        try:
            yield decision
        except LeaseboardError as exc:
            decision.note(decision="refused", code=exc.code)
            raise
        except Exception as exc:
            span.record_exception(exc)
            span.set_status(trace.StatusCode.ERROR, type(exc).__name__)
            span.set_attribute("error.type", type(exc).__qualname__)
            raise


def note_current(describe: Callable[[Decision], None]) -> None:
    """Let `describe` add to the current decision span (say, before raising a refusal that
    was committed first); not called at all when tracing is off."""
    if tracing_on():
        describe(Decision(trace.get_current_span()))


def current_trace_id() -> str:
    """The trace this request or task belongs to (32 hex digits), or "" when not traced."""
    if not tracing_on():
        return ""
    context = trace.get_current_span().get_span_context()
    return format_trace_id(context.trace_id) if context.is_valid else ""


def decided(
    name: str,
    *,
    about: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
    result: Callable[[Decision, Any], None] | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A service whose call is one decision, as a span: `about(kwargs)` names what is
    decided on (before the call, so a refusal carries it), `result(span, value)` what was
    decided. Off, the call costs one global read more."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def traced(*args: P.args, **kwargs: P.kwargs) -> R:
            if not tracing_on():
                return fn(*args, **kwargs)
            with decision_span(name, **(about(kwargs) if about else {})) as span:
                value = fn(*args, **kwargs)
                if result is not None:
                    result(span, value)
                return value

        return traced

    return wrap
