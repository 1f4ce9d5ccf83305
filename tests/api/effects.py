"""Proposing an effect over the API, as the tests of tests/api and tests/security do: one
request body, its defaults those of the payments example (a refund of order 1)."""

from __future__ import annotations

from typing import Any


def effect_propose(
    api: Any,
    token: str,
    grant: dict[str, Any],
    key: str,
    *,
    kind: str = "payment.refund",
    target: str = "order-1",
    payload: dict[str, Any] | None = None,
) -> Any:
    """POST /api/v1/effects under `grant` (an acquire's answer: lease_id, epoch) with
    idempotency key `key`; the answer, unchecked (no payload: the member is left out)."""
    body: dict[str, Any] = {
        "lease_id": grant["lease_id"],
        "epoch": grant["epoch"],
        "kind": kind,
        "target": target,
        "idempotency_key": key,
    }
    if payload is not None:
        body["payload"] = payload
    return api.post("/api/v1/effects", body, token)
