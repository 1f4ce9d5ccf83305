"""The recipient guard's check as an OpenTelemetry span, when OpenTelemetry is installed
and a tracer provider is (the recipient's own service set-up); otherwise nothing at all.

The span, `leaseboard.recipient.check`, joins the recipient's current trace (the request
that carries the effect: its `traceparent` continues the agent's trace) and carries
`leaseboard.work_key`, `leaseboard.epoch`, `leaseboard.decision` (accepted | refused),
`leaseboard.code`, `leaseboard.high_water` and `leaseboard.effect_id`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from leaseboard_recipient.verifier import Decision

try:
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - the recipient extra does not require it
    _trace = None  # type: ignore[assignment]


def traced_check(recipient: str, decide: Callable[[], Decision]) -> Decision:
    """Run `decide` (the verifier's whole check) inside the span, and describe its answer."""
    if _trace is None or isinstance(_trace.get_tracer_provider(), _trace.ProxyTracerProvider):
        return decide()
    tracer = _trace.get_tracer("leaseboard_recipient")
    with tracer.start_as_current_span(
        "leaseboard.recipient.check", attributes={"leaseboard.recipient": recipient}
    ) as span:
        decision = decide()
        attributes: dict[str, Any] = {
            "leaseboard.decision": "accepted" if decision.accepted else "refused",
            "leaseboard.work_key": decision.work_key,
            "leaseboard.epoch": decision.epoch,
            "leaseboard.code": decision.code,
            "leaseboard.high_water": decision.high_water,
            "leaseboard.effect_id": decision.claims.effect_id if decision.claims else None,
        }
        span.set_attributes({k: v for k, v in attributes.items() if v is not None})
        if not decision.accepted:
            span.set_attribute("error.type", decision.code or "refused")
        return decision
