"""The one authority: may this executor do this act on this work item now?

Services call `authorize` (or `verdict`, when a refusal must be recorded before it is
raised) after taking their locks and reading the database clock, for the API and the
dashboard alike. The rules themselves are a table in `leaseboard.domain.authority`; this
module only gathers the facts the table is asked about (who the actor is:
`leaseboard.core.actors`). Nothing here writes.
"""

from __future__ import annotations

from typing import TypedDict, Unpack

from leaseboard.core.actors import (
    BREAK_GLASS_PERMISSION,
    RECIPIENT_KIND,
    Actor,
    agent_queues_of,
    user_role_scopes,
    user_roles,
)
from leaseboard.core.models import Effect, Lease, WorkItem
from leaseboard.domain.authority import (
    IDENTITY_CODES,
    RULES,
    Act,
    Epoch,
    Party,
    Role,
    Verdict,
    decide,
)
from leaseboard.domain.certainty import LIVE, Certainty, LeaseTimes, state_at
from leaseboard.domain.errors import ERRORS_BY_CODE, LeaseboardError

# Who acts lives in leaseboard.core.actors; most callers import it from here, beside
# `authorize`, so it is re-exported.
__all__ = [
    "BREAK_GLASS_PERMISSION",
    "RECIPIENT_KIND",
    "About",
    "Actor",
    "agent_queues_of",
    "audit_role",
    "authorize",
    "authorize_who",
    "certainty_of",
    "ended_detail",
    "hold_reason_of",
    "may_ever",
    "refusal",
    "roles_counting",
    "user_role_scopes",
    "user_roles",
    "verdict",
]


def audit_role(act: Act, actor: Actor) -> str:
    """The capacity an act was done in, for the audit log: the first of the act's roles
    the actor holds ("operator" for acts under standing; else any role it holds), or
    "agent" (or "recipient")."""
    if actor.is_agent or actor.is_recipient:
        return actor.kind
    allow = RULES[act].allow
    for role in Role:
        if Party(role.value) in allow and role in actor.roles:
            return role.value
    if Party.STANDING in allow:
        return Role.OPERATOR.value
    held = [role for role in Role if role in actor.roles]
    return held[0].value if held else "human"


def certainty_of(lease: Lease | None, now_ms: int | None) -> Certainty | None:
    if lease is None:
        return None
    assert now_ms is not None, "a decision about a lease needs the database clock"
    times = LeaseTimes(Certainty(lease.state), lease.jeopardy_at_ms, lease.expires_at_ms)
    return state_at(times, now_ms)


class About(TypedDict, total=False):
    """What an act is about, as far as the table asks: `lease` is the lease the act is
    about (for a decision on an effect, the effect's lease); `current_epoch` is the work
    item's epoch read under its lock; `now_ms` the database clock read after the locks.
    `queue`: the queue of the work the act is about (the `scoped` acts need it); `held`:
    whether the work item is on hold (default: the lease's copy of its hold), and why;
    `subject_user_id`: the person the act is about (their roles, a change granting them).

    A person's roles held for named queues count only for work in those queues: the queue
    is `queue`, else the queue of `work_item_id`, of the effect, or of the lease (read
    here, for a scoped person only). An act about an agent (quarantine) names
    `agent_queues`, the queues it may use (None: all): the role must cover each. `anywhere`
    asks whether the person may do the act in some queue (what a page offers); the
    service then decides the act itself with its queue. `possible`: asked of no object
    (a page's offer), so an operator counts as one who may come to hold standing."""

    now_ms: int | None
    lease: Lease | None
    epoch: int | None
    current_epoch: int | None
    effect: Effect | None
    successor: Lease | None
    requester_user_id: int | None
    subject_user_id: int | None
    queue: str | None
    work_item_id: int | None
    agent_queues: frozenset[str] | None
    anywhere: bool
    possible: bool
    held: bool
    hold_reason: str


def _queue_of(about: About) -> str | None:
    """The queue of the work an act is about, read from the database (one query)."""
    item_id = about.get("work_item_id")
    for obj in (about.get("effect"), about.get("lease"), about.get("successor")):
        if item_id is None and obj is not None:
            item_id = obj.work_item_id
    if item_id is None:
        return None
    return WorkItem.objects.filter(pk=item_id).values_list("queue__name", flat=True).first()


def roles_counting(actor: Actor, about: About) -> frozenset[Role]:
    """The actor's roles that count for the act `about` describes (docs/design.md §9:
    roles may be scoped to queues). Someone whose roles all hold for every queue reads
    nothing; a scoped person's act is decided with the work's queue, or with only the
    roles held everywhere when the act names none."""
    if not actor.scoped or about.get("anywhere"):
        return actor.roles
    if "agent_queues" in about:
        queues = about["agent_queues"]
        if not queues:
            return actor.roles_in(None)
        return frozenset.intersection(*(actor.roles_in(q) for q in queues))
    queue = about.get("queue")
    return actor.roles_in(queue if queue is not None else _queue_of(about))


def _parties(actor: Actor, act: Act, about: About) -> frozenset[Party]:
    lease, effect, successor = about.get("lease"), about.get("effect"), about.get("successor")
    epoch, current_epoch = about.get("epoch"), about.get("current_epoch")
    requester_user_id = about.get("requester_user_id")
    subject_user_id = about.get("subject_user_id")
    if actor.is_recipient:
        return frozenset({Party.RECIPIENT})  # never a holder, a role or a proposer
    parties: set[Party] = {Party.AGENT if actor.is_agent else Party.HUMAN}
    roles = roles_counting(actor, about)
    parties.update(Party(role.value) for role in roles)
    if actor.break_glass and (roles or not actor.scoped):
        parties.add(Party.BREAK_GLASS)  # a scoped person breaks the glass in their queues
    operator = Role.OPERATOR in roles
    if about.get("possible") and operator and not actor.is_agent:
        parties.add(Party.STANDING)  # standing is the operator's to take over and act under
    if act is Act.RECONCILE:
        # Standing over an effect comes from holding the work item's live lease now,
        # at its current epoch and later than the effect's.
        if (
            actor.is_holder_of(successor)
            and successor is not None
            and effect is not None
            and certainty_of(successor, about.get("now_ms")) in LIVE
            and successor.epoch == current_epoch
            and successor.epoch > effect.epoch
        ):
            if actor.is_agent and epoch == successor.epoch:
                parties.add(Party.SUCCESSOR)
            elif not actor.is_agent and operator:
                parties.add(Party.STANDING)
    elif actor.is_holder_of(lease):
        parties.add(Party.HOLDER if actor.is_agent else Party.STANDING)
        if not actor.is_agent and not operator:
            parties.discard(Party.STANDING)  # standing is acted on in the operator role
    if effect is not None and actor.executor_id is not None:
        if effect.executor_id == actor.executor_id:
            parties.add(Party.PROPOSER)
    if requester_user_id is not None and requester_user_id == actor.user_id:
        parties.add(Party.REQUESTER)
    if subject_user_id is not None and subject_user_id == actor.user_id:
        parties.add(Party.SELF)
    return frozenset(parties)


def verdict(act: Act, actor: Actor, **about: Unpack[About]) -> Verdict:
    """The table's answer for this actor, object (`About`) and moment."""
    parties = _parties(actor, act, about)
    lease, effect, epoch = about.get("lease"), about.get("effect"), about.get("epoch")
    current_epoch = about.get("current_epoch")
    rule = RULES[act]
    matches = True
    if rule.epoch is not Epoch.NONE:
        presented = effect.epoch if effect is not None and epoch is None else epoch
        matches = lease is not None and presented == lease.epoch
        if rule.epoch is Epoch.CURRENT:
            matches = matches and presented == current_epoch
    held = about.get("held")
    queue = about.get("queue")
    return decide(
        act,
        parties=parties,
        certainty=certainty_of(lease, about.get("now_ms")),
        epoch_matches=matches,
        # The hold is the work item's; a live lease carries a copy of it for the hot paths.
        on_hold=held if held is not None else (lease is not None and lease.held_at_ms is not None),
        in_scope=queue is None or actor.may_use(queue),
    )


# deliberate: a keyword-only signature, alike in shape with other services' only.
def refusal(
    v: Verdict,
    *,
    lease: Lease | None = None,
    epoch: int | None = None,
    current_epoch: int | None = None,
    **extra: object,
) -> LeaseboardError:
    """The typed error for a refusing verdict. An ended lease's refusal carries the reason
    it ended (a revoked agent learns why)."""
    assert v.code is not None
    cls = ERRORS_BY_CODE[v.code]
    detail = v.detail
    reason = ""
    revoked_by = ""
    if v.code in {"lease_expired", "lease_released", "lease_revoked"} and lease is not None:
        reason = lease.end_reason or ("ttl elapsed" if v.code == "lease_expired" else "")
        detail, revoked_by = ended_detail(lease, v.code, reason or detail)
    fields: dict[str, object] = {**extra}
    if revoked_by:
        fields["revoked_by"] = revoked_by
    if current_epoch is not None:
        fields["current_epoch"] = current_epoch
    if epoch is not None:
        fields["your_epoch"] = epoch
    if reason:
        fields["reason"] = reason
    return cls(detail, **fields)


def ended_detail(lease: Lease, code: str, reason: str) -> tuple[str, str]:
    """What a refusal under an ended lease tells its holder: the reason, and for a revoke
    who revoked it ("revoked by olga: misbehaving: ..."); and that person's name."""
    if code != "lease_revoked" or lease.ended_by_id is None:
        return reason, ""
    by = lease.ended_by.display_name if lease.ended_by else ""
    # A takeover's reason names its approver already ("takeover #3 approved by abe: ...").
    return (f"revoked by {by}: {reason}" if by and by not in reason else reason), by


def hold_reason_of(about: About) -> str:
    lease = about.get("lease")
    return about.get("hold_reason") or (lease.hold_reason if lease is not None else "")


def authorize(act: Act, actor: Actor, **about: Unpack[About]) -> None:
    """Raise the refusal unless the table allows the act. An on_hold refusal says why the
    work is held; a queue_not_allowed one, which queue."""
    v = verdict(act, actor, **about)
    if not v.allowed:
        extra: dict[str, object] = {}
        if v.code == "on_hold":
            reason = hold_reason_of(about)
            if reason:
                v = Verdict(v.code, f"{v.detail} ({reason})")
                extra["reason"] = reason
        elif v.code == "queue_not_allowed":
            extra["queue"] = about.get("queue")
        raise refusal(
            v,
            lease=about.get("lease"),
            epoch=about.get("epoch"),
            current_epoch=about.get("current_epoch"),
            **extra,
        )


def may_ever(act: Act, actor: Actor, *, queue: str | None = None) -> bool:
    """Whether the actor may do `act` on some object, in some queue or in `queue`: what a
    page offers (and a page gate admits). The act itself is decided again by its service,
    on its object."""
    about: About = {"possible": True}
    if queue is not None:
        about["queue"] = queue
    else:
        about["anywhere"] = True
    return verdict(act, actor, **about).code not in IDENTITY_CODES


def authorize_who(act: Act, actor: Actor) -> None:
    """Raise the refusal if the actor may never do `act` whatever its object (a role
    missing): for a bulk act, asked once before anything is written; each item is then
    decided by `authorize` with its own lease."""
    v = verdict(act, actor, anywhere=True, possible=True)
    if v.code in IDENTITY_CODES:
        raise refusal(v)
