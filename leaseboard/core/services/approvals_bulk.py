"""Approve or reject by query ("approve all N matching this filter" on the approvals
inbox): each waiting effect by the one decision (approvals.effect_approve or
effect_reject: its own transaction, the authority, single use, bound to the content the
approver was shown by its digest), an outcome per effect, the bulk audited with them all."""

from __future__ import annotations

import uuid
from typing import Any

from leaseboard.core.authority import Actor, authorize_who
from leaseboard.core.models import Effect
from leaseboard.core.services.approvals import effect_approve, effect_reject
from leaseboard.core.services.bulk import (
    BulkResult,
    ItemOutcome,
    bulk_recorded,
    each_item,
    ids_checked,
)
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import NotFound, ValidationFailed

DECISIONS = ("approve", "reject")


def effects_decide_bulk(
    *,
    decision: str,
    effect_ids: list[Any],
    digests: dict[str, str],
    actor: Actor,
    note: str,
    query: dict[str, str] | None = None,
    request_id: str = "",
) -> BulkResult:
    """Decide several waiting effects one way with one note (required to reject). An
    effect decided meanwhile, lapsed, or changed since the page showed it (`digests`: id
    -> the content digest shown) is refused alone, with its code."""
    if decision not in DECISIONS:
        raise ValidationFailed("decide approve or reject", param="decision")
    act = Act.APPROVE_EFFECT if decision == "approve" else Act.REJECT_EFFECT
    authorize_who(act, actor)
    note = (note or "").strip()[:1000]
    if decision == "reject" and not note:
        raise ValidationFailed("a rejection needs a note", param="note")
    ids = ids_checked(effect_ids, what="effect", param="effect_ids")
    known = {
        str(e.id): e
        for e in Effect.objects.filter(id__in=_uuids(ids))
        .select_related("work_item")
        .only("id", "kind", "target", "work_item__key")
    }

    def named(raw: str) -> ItemOutcome:
        e = known.get(raw)
        return (
            ItemOutcome(raw, False, e.work_item.key, f"{e.kind} on {e.target}")
            if e
            else (ItemOutcome(raw, False))
        )

    def one(raw: str) -> ItemOutcome:
        if raw not in known:
            raise NotFound(f"no effect {raw[:40]}")
        digest = digests.get(raw) or None
        if decision == "approve":
            effect_approve(
                effect_id=raw, actor=actor, note=note, request_id=request_id, digest=digest
            )
        else:
            effect_reject(
                effect_id=raw, actor=actor, note=note, request_id=request_id, digest=digest
            )
        base = named(raw)
        return ItemOutcome(raw, True, base.work_key, base.about)

    return bulk_recorded(
        act=act,
        actor=actor,
        action=f"effect.{decision}_bulk",
        outcomes=each_item(ids, one, named=named),
        reason=note or "approved in bulk",  # a rejection always has its note
        query=query,
        request_id=request_id,
    )


def _uuids(ids: list[str]) -> list[uuid.UUID]:
    out = []
    for raw in ids:
        try:
            out.append(uuid.UUID(raw))
        except ValueError:
            continue
    return out
