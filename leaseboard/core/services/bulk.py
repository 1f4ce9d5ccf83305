"""What every bulk act by query shares ("select all N matching this filter": hold,
acknowledge, approve or reject): the asked ids bounded, an outcome per item, and the whole
bulk written down in one audit entry, refusals included.

Each item is decided by the act's one service, exactly as when it is done alone (the
authority, the locks, its own audit entry); the bulk never decides anything itself. The
confirmation pages evaluate the filter on the server and post the ids they listed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from django.db import transaction

from leaseboard.core.authority import Actor
from leaseboard.core.clock import db_now_ms
from leaseboard.core.services.audit import audit_act
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import LeaseboardError, ValidationFailed
from leaseboard.domain.text import storable_or_replaced

BULK_MAX = 200  # items per bulk act, said on every confirmation page


@dataclass(frozen=True)
class ItemOutcome:
    """One item of a bulk act: done, or refused with the act's own code and words."""

    id: str
    ok: bool
    work_key: str = ""
    about: str = ""  # what the item is, for the outcome table (a holder, an effect)
    code: str | None = None
    detail: str = ""


@dataclass
class BulkResult:
    bulk_id: str
    outcomes: list[ItemOutcome] = field(default_factory=list)

    @property
    def succeeded(self) -> int:
        return sum(1 for o in self.outcomes if o.ok)


def ids_checked(raw: list[Any], *, what: str, param: str) -> list[str]:
    """The asked ids, each once, in order; at least one and at most BULK_MAX."""
    texts = (storable_or_replaced(str(x).strip())[:100] for x in raw if x and str(x).strip())
    ids = list(dict.fromkeys(texts))
    if not ids:
        raise ValidationFailed(f"select at least one {what}", param=param)
    if len(ids) > BULK_MAX:
        raise ValidationFailed(f"at most {BULK_MAX} {what}s per bulk act", param=param)
    return ids


def each_item(
    ids: list[str], one: Callable[[str], ItemOutcome], *, named: Callable[[str], ItemOutcome]
) -> list[ItemOutcome]:
    """Run `one` per id; a refusal is that item's outcome (named as `named` says) and the
    others go on."""
    outcomes = []
    for raw in ids:
        try:
            outcomes.append(one(raw))
        except LeaseboardError as exc:
            base = named(raw)
            outcomes.append(
                ItemOutcome(base.id, False, base.work_key, base.about, exc.code, exc.detail)
            )
    return outcomes


def bulk_audited(
    *,
    act: Act,
    actor: Actor,
    action: str,
    outcomes: list[ItemOutcome],
    reason: str,
    query: dict[str, str] | None = None,
    request_id: str = "",
    bulk_id: str = "",
) -> BulkResult:
    """The bulk's own audit entry, in the caller's transaction: what was asked (the filter
    and the ids) and every item's outcome."""
    result = BulkResult(bulk_id or uuid.uuid4().hex, outcomes)
    # deliberate: audit_act's keywords one a line; each act records its own before and after.
    audit_act(
        act=act,
        actor=actor,
        action=action,
        object_type="bulk",
        object_id=result.bulk_id,
        at_ms=db_now_ms(),
        reason=reason,
        before={"query": query or {}, "asked": [o.id for o in outcomes]},
        after={"succeeded": result.succeeded, "results": [asdict(o) for o in outcomes]},
        request_id=request_id,
    )
    return result


@transaction.atomic(durable=True)
def bulk_recorded(**kw: Any) -> BulkResult:
    """bulk_audited in a transaction of its own: for acts whose one service is itself the
    outermost transaction (each item committed, with its audit entry, on its own)."""
    return bulk_audited(**kw)
