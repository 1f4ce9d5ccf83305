"""Locking helpers written once: every decision locks the work item first, then the rows
it is about (the core's lock order: work item, lease, then anything else)."""

from __future__ import annotations

from typing import Any

from django.db.models import Model

from leaseboard.core.models import Lease, WorkItem
from leaseboard.domain.errors import NotFound


def work_item_locked_by(*, key: str | None = None, item_id: int | None = None) -> WorkItem:
    """Lock a work item (only its own row) by key or id."""
    qs = WorkItem.objects.select_for_update(no_key=True, of=("self",)).select_related("queue")
    if key is not None:
        item = qs.filter(key=key).first()
    else:
        item = qs.filter(id=item_id).first() if item_id is not None else None
    if item is None:
        raise NotFound(f"no work item {key!r}" if key is not None else "no such work item")
    return item


def work_item_locked(model: type[Model], pk: Any, *, what: str) -> WorkItem:
    """Lock the work item a row belongs to, before the row itself: peek at the row's
    `work_item_id` without a lock, then lock the item (the caller then locks the row)."""
    peek = model._default_manager.filter(pk=pk).values("work_item_id").first()
    if peek is None:
        raise NotFound(f"no {what} {pk}")
    return work_item_locked_by(item_id=peek["work_item_id"])


# What a lease's lock reads along unless told otherwise: its work item and its holder.
WORK_AND_HOLDER = ("work_item", "holder")


def lease_locked(lease_id: Any, *, related: tuple[str, ...] = WORK_AND_HOLDER) -> Lease:
    """Lock one lease (only its own row) by id, reading `related` along; NotFound if none.
    Where the work item must be locked too, lock it first (`work_item_locked`)."""
    lease = (
        Lease.objects.select_for_update(no_key=True, of=("self",))
        .select_related(*related)
        .filter(id=lease_id)
        .first()
    )
    if lease is None:
        raise NotFound(f"no lease {lease_id}")
    return lease


def leases_locked(
    lease_ids: list[Any], *, related: tuple[str, ...] = WORK_AND_HOLDER
) -> dict[Any, Lease]:
    """Lock many leases (only their own rows) in one statement, in id order (two batches
    over the same leases take them in the same order), reading `related` along."""
    return {
        lease.id: lease
        for lease in Lease.objects.select_for_update(no_key=True, of=("self",))
        .select_related(*related)
        .filter(id__in=set(lease_ids))
        .order_by("id")
    }
