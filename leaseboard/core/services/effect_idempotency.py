"""Idempotency keys of effects: a proposer's retry with the same key for the same effect
is answered as it was the first time; the same key for anything else is a conflict, never
the earlier effect's answer."""

from __future__ import annotations

import uuid
from typing import Any

from leaseboard.core.models import Effect, Executor
from leaseboard.core.services.jsondocs import json_canonical
from leaseboard.domain.errors import IdempotencyConflict


def effect_same_request(
    first: Effect, lease_id: uuid.UUID, kind: str, target: str, payload: Any
) -> None:
    """A repeated idempotency key must name the same effect; anything else is a conflict."""
    differs = [
        name
        for name, old, new in (
            ("lease_id", first.lease_id, lease_id),
            ("kind", first.kind, kind),
            ("target", first.target, target),
            ("payload", json_canonical(first.payload), json_canonical(payload)),
        )
        if old != new
    ]
    if differs:
        raise IdempotencyConflict(
            f"idempotency key {first.idempotency_key!r} was used for another effect "
            f"(different {', '.join(differs)})",
            effect_id=str(first.id),
        )


def effect_first_under_key(
    lease_found: bool, first_id: uuid.UUID | None, executor: Executor, key: str
) -> Effect | None:
    """The effect this executor proposed under `key` before, if any. `first_id` is what
    the decision's lease read found (None: none under that lease's read); when no lease
    was found, the key is looked up on its own: a key used for another lease is still a
    conflict, not a missing lease."""
    if not lease_found:
        return Effect.objects.filter(executor=executor, idempotency_key=key).first()
    if first_id is not None:
        return Effect.objects.get(id=first_id)
    return None
