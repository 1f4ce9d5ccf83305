"""The operator's standing: every open intervention granted to them, with its lease, time
left, effects to reconcile and the latest checkpoint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Checkpoint, Effect, Lease
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.takeovers.models import Intervention


@dataclass
class Standing:
    intervention: Intervention
    lease: Lease
    expires_in_ms: int
    max_in_ms: int
    live: bool
    unreconciled: list[Effect]
    effects: list[Effect]
    checkpoint: Checkpoint | None


def my_standing(user: Any) -> list[Standing]:
    """Every open intervention whose standing was granted to `user`."""
    now = db_now_ms()
    ivs = list(
        Intervention.objects.filter(grantee__user=user, outcome=Intervention.Outcome.OPEN)
        .select_related("lease", "work_item", "work_item__queue", "agent", "grantee")
        .order_by("-decided_at_ms")[:20]
    )
    item_ids = [iv.work_item_id for iv in ivs]
    effects: dict[int, list[Effect]] = {i: [] for i in item_ids}
    for e in (
        Effect.objects.filter(work_item_id__in=item_ids)
        .select_related("executor")
        .order_by("-proposed_at_ms")[:500]
    ):
        effects[e.work_item_id].append(e)
    checkpoints: dict[int, Checkpoint] = {}
    for cp in Checkpoint.objects.filter(work_item_id__in=item_ids).order_by("work_item_id", "-seq"):
        checkpoints.setdefault(cp.work_item_id, cp)
    out = []
    for iv in ivs:
        lease = iv.lease
        live = lease.state in LIVE_STATES and lease.expires_at_ms > now
        mine = effects[iv.work_item_id]
        out.append(
            Standing(
                intervention=iv,
                lease=lease,
                expires_in_ms=max(0, lease.expires_at_ms - now),
                max_in_ms=max(0, lease.max_expires_at_ms - now),
                live=live,
                unreconciled=[e for e in mine if e.needs_reconciliation],
                effects=mine[:50],
                checkpoint=checkpoints.get(iv.work_item_id),
            )
        )
    return out
