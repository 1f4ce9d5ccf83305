"""Proposals a second admin decides (four-eyes): approve one — never one's own, nor one
about oneself (the authority's APPROVE_POLICY_CHANGE denies REQUESTER and SELF) — or reject
it; its proposer may withdraw it. One mechanism for every kind: a rule set, what a person
may do, a new person, a password reset, four-eyes turned off."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from leaseboard.core.authority import Actor, authorize
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import NotFound, ValidationFailed
from leaseboard.policy.models import PolicyChange
from leaseboard.policy.services import people, rules
from leaseboard.policy.services.common import audited
from leaseboard.policy.services.four_eyes import four_eyes_apply_locked

# The act a proposer withdraws their own proposal of each kind under.
PROPOSING_ACT = {
    PolicyChange.Kind.RULES: Act.CHANGE_RULE,
    PolicyChange.Kind.PERSON: Act.MANAGE_USERS,
    PolicyChange.Kind.PERSON_CREATE: Act.MANAGE_USERS,
    PolicyChange.Kind.PASSWORD_RESET: Act.MANAGE_USERS,
    PolicyChange.Kind.FOUR_EYES: Act.CHANGE_FOUR_EYES,
}


def _pending_locked(change_id: int) -> PolicyChange:
    change = (
        PolicyChange.objects.select_for_update(no_key=True, of=("self",))
        .select_related("queue", "subject")
        .filter(id=change_id)
        .first()
    )
    if change is None:
        raise NotFound(f"no change {change_id}")
    if change.status != PolicyChange.Status.PENDING:
        raise ValidationFailed(f"change {change.pk} is {change.status}")
    return change


def _decided(change: PolicyChange, status: str, actor: Actor, note: str) -> None:
    change.status = status
    change.decided_by = (
        get_user_model().objects.filter(pk=actor.user_id).first() if actor.user_id else None
    )
    change.decided_by_name = actor.name
    change.decided_at = timezone.now()
    change.note = note[:1000]
    change.save(update_fields=["status", "decided_by", "decided_by_name", "decided_at", "note"])


@dataclass(frozen=True)
class Decided:
    change: PolicyChange
    link: str = ""  # a set-password link the approver hands over (shown once)
    who: str = ""  # whose link it is


@transaction.atomic(durable=True)
def change_approve(
    *, change_id: int, actor: Actor, note: str = "", request_id: str = ""
) -> Decided:
    """A second admin applies a proposal: not its proposer, not the person it is about."""
    change = _pending_locked(change_id)
    authorize(
        Act.APPROVE_POLICY_CHANGE,
        actor,
        requester_user_id=change.requested_by_id,
        subject_user_id=change.subject_id,
    )
    link = who = ""
    kind = change.kind
    if kind == PolicyChange.Kind.RULES:
        rules.rule_change_apply_locked(change, actor, note, request_id)
    elif kind == PolicyChange.Kind.PERSON:
        people.person_grants_apply_locked(change, actor)
    elif kind == PolicyChange.Kind.PERSON_CREATE:
        created = people.person_create_apply_locked(change, actor)
        assert created.user is not None
        link, who = created.link, created.user.get_username()
        # The new person is who the change was about: recorded for the page and the log.
        change.subject = created.user  # type: ignore[assignment]
        change.save(update_fields=["subject"])
    elif kind == PolicyChange.Kind.PASSWORD_RESET:
        link = people.password_reset_apply_locked(change, actor).link
        who = change.subject.get_username() if change.subject else ""
    else:
        four_eyes_apply_locked(change, actor)
    _decided(change, PolicyChange.Status.APPLIED, actor, note)
    if kind != PolicyChange.Kind.RULES:  # a rule change's approval is audited with its sets
        audited(
            Act.APPROVE_POLICY_CHANGE,
            actor,
            action="change.approved",
            object_type="change",
            object_id=str(change.pk),
            before={"change": change.pk, "kind": kind, "status": "pending"},
            after={"change": change.pk, "kind": kind, "status": "applied"},
            reason=f"{change.what}, proposed by {change.requested_by_name}. {note}".strip(),
            request_id=request_id,
        )
    return Decided(change, link, who)


@transaction.atomic(durable=True)
def change_reject(*, change_id: int, actor: Actor, note: str = "", request_id: str = "") -> Decided:
    """Another admin rejects a proposal, or its proposer withdraws it; nothing applies."""
    change = _pending_locked(change_id)
    mine = change.requested_by_id is not None and change.requested_by_id == actor.user_id
    act = PROPOSING_ACT[PolicyChange.Kind(change.kind)] if mine else Act.APPROVE_POLICY_CHANGE
    authorize(act, actor, subject_user_id=None if mine else change.subject_id)
    status = PolicyChange.Status.WITHDRAWN if mine else PolicyChange.Status.REJECTED
    _decided(change, status, actor, note)
    is_rules = change.kind == PolicyChange.Kind.RULES
    audited(
        act,
        actor,
        action=f"policy.change_{status}" if is_rules else f"change.{status}",
        object_type="queue" if is_rules else "change",
        object_id=rules.scope_name(change.queue.name if change.queue else None)
        if is_rules
        else str(change.pk),
        before={"change": change.pk, "status": "pending"},
        after={"change": change.pk, "status": status},
        reason=note,
        request_id=request_id,
    )
    return Decided(change)
