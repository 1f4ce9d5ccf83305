"""What every takeover service shares, written once: limits from settings, input checks,
the intervention timeline, the audit call, and the lock-the-work-item-first helpers.

Takeovers is workflow: it keeps requests, decisions and interventions, asks the core
authority, and changes leases, effects and alerts only through core services.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Model

from leaseboard.core.authority import Actor
from leaseboard.core.locking import work_item_locked
from leaseboard.core.models import Executor, Lease, WorkItem
from leaseboard.core.services.audit import audit_act
from leaseboard.core.services.leases import parse_lease_id
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import StaleEpoch, ValidationFailed
from leaseboard.domain.vocabulary import reason_checked as domain_reason_checked
from leaseboard.takeovers.models import (
    Intervention,
    InterventionEvent,
    TakeoverRequest,
)

MINUTE_MS = 60_000


def standing_default_ms() -> int:
    return settings.LEASEBOARD_TAKEOVER_DEFAULT_STANDING_MS


def standing_min_ms() -> int:
    return settings.LEASEBOARD_TAKEOVER_MIN_STANDING_MS


def standing_max_ms() -> int:
    """The most standing a human may hold in total, extensions included."""
    return settings.LEASEBOARD_TAKEOVER_MAX_STANDING_MS


def decision_ttl_ms() -> int:
    """How long a request waits for a decision before it expires."""
    return settings.LEASEBOARD_TAKEOVER_DECISION_TTL_MS


def reason_checked(category: str, text: str) -> str:
    return domain_reason_checked(category, text, what="a takeover")


def standing_checked(standing_ms: int | None) -> int:
    value = standing_default_ms() if standing_ms is None else standing_ms
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValidationFailed("standing is a number of milliseconds", param="standing_ms")
    low, high = standing_min_ms(), standing_max_ms()
    if not low <= value <= high:
        raise ValidationFailed(
            f"standing must be between {low // MINUTE_MS} and {high // MINUTE_MS} minutes",
            param="standing_ms",
        )
    return value


def operator_named(username: str) -> Executor:
    """Another operator to give standing to: an active person with the operator role (their
    executor row, made on first need)."""
    from django.contrib.auth import get_user_model

    from leaseboard.core.authority import user_roles
    from leaseboard.core.services.executors import human_executor_for_user_id
    from leaseboard.domain.authority import Role

    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None or Role.OPERATOR not in user_roles(user):
        raise ValidationFailed(f"no active operator named {username!r}", param="grantee_operator")
    return human_executor_for_user_id(user.id)


def agent_named(name: str) -> Executor:
    agent = Executor.objects.filter(name=name, kind=Executor.Kind.AGENT, is_active=True).first()
    if agent is None:
        raise ValidationFailed(f"no active agent named {name!r}", param="agent")
    return agent


def lease_view(lease: Lease | None) -> dict[str, Any]:
    if lease is None:
        return {"lease_id": None}
    return {
        "lease_id": str(lease.id),
        "epoch": lease.epoch,
        "holder": lease.holder.name,
        "state": lease.state,
        "expires_at_ms": lease.expires_at_ms,
    }


def timeline(iv: Intervention, kind: str, at_ms: int, actor: str, **detail: Any) -> None:
    """One step on an intervention's timeline."""
    InterventionEvent.objects.create(
        intervention=iv, kind=kind, at_ms=at_ms, actor_name=actor, detail=detail
    )


OBJECT_TYPES: dict[type[Model], str] = {
    TakeoverRequest: "takeover_request",
    Intervention: "intervention",
}


# deliberate: a keyword-only signature, alike in shape with other audit wrappers; it maps
# a request or an intervention to audit_act's object.
def audited(
    *,
    act: Act,
    actor: Actor,
    action: str,
    obj: Model,
    item: WorkItem,
    now: int,
    reason: str,
    before: dict[str, Any],
    after: dict[str, Any],
    request_id: str,
) -> None:
    """The audit entry for a takeover act on a request or an intervention."""
    # deliberate: audit_act's keywords one a line, named from this act's own.
    audit_act(
        act=act,
        actor=actor,
        action=action,
        object_type=OBJECT_TYPES[type(obj)],
        object_id=str(obj.pk),
        work_item=item,
        at_ms=now,
        reason=reason,
        before=before,
        after=after,
        request_id=request_id,
    )


def locked(
    model: type[Model], pk: Any, *, what: str, related: tuple[str, ...] = ()
) -> tuple[Any, WorkItem]:
    """Lock the work item a row belongs to, then the row (the core's lock order)."""
    item = work_item_locked(model, pk, what=what)
    row = (
        model._default_manager.select_for_update(no_key=True, of=("self",))
        .select_related(*related)
        .get(pk=pk)
    )
    return row, item


def standing_lease_locked(*, iv: Intervention, item: WorkItem, lease_id: Any, epoch: int) -> Lease:
    """Lock the intervention's own lease. A lease id that is not this intervention's is a
    stale view of the page; the authority decides everything else."""
    lid = parse_lease_id(lease_id)
    if lid != iv.lease_id:
        raise StaleEpoch(
            "that is not this intervention's lease", current_epoch=item.epoch, your_epoch=epoch
        )
    return (
        Lease.objects.select_for_update(no_key=True, of=("self",))
        .select_related("holder")
        .get(id=lid)
    )
