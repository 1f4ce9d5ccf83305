"""The delivery log's reads: the latest attempts of every outbox (alert notifications,
approver notices, epoch-advance notices), newest first, with their dead letters counted.
A fixed number of queries per page; nothing here writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count

from leaseboard.core.models import EpochNotice
from leaseboard.sweeps.models import ApprovalNotice, DeliveryStatus, NotificationDelivery

PAGE = 100
STATUSES = tuple(DeliveryStatus.values)


@dataclass
class DeliveryLog:
    status: str  # "" for every status
    alerts: list[Any] = field(default_factory=list)
    approvals: list[Any] = field(default_factory=list)
    epochs: list[Any] = field(default_factory=list)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # outbox -> status -> n


def _counts(model: Any) -> dict[str, int]:
    rows = model.objects.values("status").annotate(n=Count("id")).order_by()
    return {row["status"]: row["n"] for row in rows}


def delivery_log(*, status: str = "", limit: int = PAGE) -> DeliveryLog:
    """The latest `limit` rows of each outbox (of one status, if given)."""
    status = status if status in STATUSES else ""
    where = {"status": status} if status else {}
    return DeliveryLog(
        status=status,
        alerts=list(
            NotificationDelivery.objects.filter(**where)
            .select_related("alert")
            .order_by("-id")[:limit]
        ),
        approvals=list(
            ApprovalNotice.objects.filter(**where)
            .select_related("effect__work_item")
            .order_by("-id")[:limit]
        ),
        epochs=list(
            EpochNotice.objects.filter(**where)
            .select_related("recipient", "work_item")
            .order_by("-id")[:limit]
        ),
        counts={
            "alerts": _counts(NotificationDelivery),
            "approvals": _counts(ApprovalNotice),
            "epochs": _counts(EpochNotice),
        },
    )
