"""Recipients' reports: a recipient's guard refused an effect (stale epoch, forged or
expired token). Kept in the work item's effect history, with one alert per incident."""

from __future__ import annotations

import uuid

from django.db import transaction

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Alert, Effect, Executor, Lease, WorkItem
from leaseboard.core.services.alerts import alerts_open
from leaseboard.domain.errors import NotFound


@transaction.atomic(durable=True)
def recipient_report_record(
    *,
    executor: Executor,
    work_key: str,
    reason: str,
    recipient: str,
    epoch: int | None = None,
    high_water: int | None = None,
    detail: str = "",
    token: str | None = None,
) -> Effect:
    """A recipient's guard refused an effect (stale epoch, forged or expired token): keep it
    in the work item's effect history and raise one alert per (work item, epoch, reason)."""
    item = WorkItem.objects.filter(key=work_key).first()
    if item is None:
        raise NotFound(f"no work item {work_key!r}")
    now = db_now_ms()
    lease = Lease.objects.filter(work_item=item, epoch=epoch).first() if epoch else None
    effect = Effect.objects.create(
        work_item=item,
        lease=lease,
        executor=executor,
        source=Effect.Source.RECIPIENT,
        epoch=epoch or 0,
        current_epoch=item.epoch,
        kind=f"recipient.{reason}",
        target=recipient,
        idempotency_key=f"recipient-report:{uuid.uuid4()}",
        payload={"high_water": high_water, "token": (token or "")[:200]},
        decision=Effect.Decision.REFUSED,
        refusal_code=reason,
        refusal_detail=(detail or f"{recipient} refused epoch {epoch} ({reason})")[:500],
        proposed_at_ms=now,
        decided_at_ms=now,
    )
    alerts_open(
        [
            Alert(
                kind=Alert.Kind.RECIPIENT_REFUSAL,
                dedupe_key=f"recipient:{item.id}:{epoch}:{reason}",
                lease=lease,
                work_item=item,
                epoch=epoch,
                message=f"{recipient} refused an effect at epoch {epoch} ({reason}); "
                f"current epoch {item.epoch}",
                detail={"effect_id": str(effect.id), "high_water": high_water},
                due_at_ms=now,
                opened_at_ms=now,
            )
        ]
    )
    return effect
