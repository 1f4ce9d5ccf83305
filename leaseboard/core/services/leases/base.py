"""What every lease service shares: lease ids from the wire, the timing a grant gets,
the reconciliation gate's question, and the executor row an actor writes history as."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings

from leaseboard.core.authority import Actor
from leaseboard.core.models import Lease, WorkItem
from leaseboard.domain.errors import (
    NotFound,
    ValidationFailed,
)
from leaseboard.domain.timing import TimingPolicy, TimingPolicyError


def parse_lease_id(raw: Any) -> uuid.UUID:
    try:
        return raw if isinstance(raw, uuid.UUID) else uuid.UUID(str(raw))
    except (ValueError, AttributeError, TypeError):
        raise NotFound(f"no lease {str(raw)[:60]!r}") from None


def timing_for(
    item: WorkItem, ttl_ms: int | None = None, max_lifetime_ms: int | None = None
) -> TimingPolicy:
    """Defaults, then the queue's overrides, then the item's, then the grant's own ttl and
    lifetime (applied together: a long human standing may exceed the queue's lifetime)."""
    try:
        policy = settings.LEASE_DEFAULTS
        if item.queue.timing:
            policy = policy.with_overrides(item.queue.timing)
        if item.timing:
            policy = policy.with_overrides(item.timing)
        grant = {"ttl_ms": ttl_ms, "max_lifetime_ms": max_lifetime_ms}
        if any(v is not None for v in grant.values()):
            policy = policy.with_overrides(grant)
        return policy
    except TimingPolicyError as exc:
        raise ValidationFailed(f"lease timing: {exc}", param=exc.param) from None


def unreconciled_effects_exist(item: WorkItem, *, exclude_lease: Lease | None = None) -> bool:
    from leaseboard.core.models import Effect

    qs = Effect.objects.filter(
        work_item=item, decision="authorized", resolution="", outcome__in=["", "unknown"]
    )
    if exclude_lease is not None:
        qs = qs.exclude(lease=exclude_lease)
    return qs.exists()


def executor_id_of(actor: Actor) -> int:
    """The executor row an actor writes history as; a human's is created on first need,
    only once an act has been allowed."""
    if actor.executor_id is not None:
        return actor.executor_id
    from leaseboard.core.services.executors import human_executor_for_user_id

    return human_executor_for_user_id(actor.user_id).id
