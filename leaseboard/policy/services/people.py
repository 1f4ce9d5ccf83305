"""People who sign in, in one module: create one, set their roles (each for every queue or
for named queues), the break-glass permission and whether they may sign in, reset a
password. All audited before -> after. The roles are `Role` (leaseboard.domain.authority),
each the auth group of its name; ROLE_NAMES is the one list of their names.

Separation of duties (docs/design.md §9): nobody changes their own roles, break-glass, sign-in or
password (the authority's MANAGE_USERS never has SELF). No admin is ever shown another
person's password: a new person, or a reset one, gets a one-time set-password link to hand
over, and an unusable password until they use it. With four-eyes on, whatever gives power
(a role, break-glass, sign-in, a new person, a reset) is a proposal a second admin decides;
whatever takes it away applies at once (containment), as long as enough admins remain to
decide: one, or two under four-eyes. Every write of a person goes through `_write_locked`,
which holds that guard (the last-admin guard on every path: the settings page, the shell,
`config apply`, a second admin's approval).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.models import Group, Permission
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from leaseboard.core.authority import BREAK_GLASS_PERMISSION, Actor, authorize
from leaseboard.core.models import RoleScope
from leaseboard.domain.authority import SCOPABLE_ROLES, Act, Role
from leaseboard.domain.errors import NotFound, ValidationFailed
from leaseboard.policy.models import PolicyChange
from leaseboard.policy.services.common import SettingsInvalid, audited
from leaseboard.policy.services.four_eyes import active_admin_count, four_eyes_on_locked

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # the project's user model (Django's own)

ROLE_NAMES = tuple(role.value for role in Role)
BREAK_GLASS = "break_glass"  # in a list of grants beside the roles (config as code, SSO)
_APP, _CODENAME = BREAK_GLASS_PERMISSION.split(".")


def user_locked(username: str) -> User:
    """Lock the user row (no key update) of `username`; NotFound if there is none."""
    user = get_user_model().objects.select_for_update(no_key=True).filter(username=username).first()
    if user is None:
        raise NotFound(f"no user {username!r}")
    return user


def password_problems(password: str, *, username: str, email: str = "") -> list[str]:
    """Django's password validators' messages for this password (empty: acceptable)."""
    candidate = get_user_model()(username=username, email=email)
    try:
        password_validation.validate_password(password, user=candidate)
    except ValidationError as exc:
        return list(exc.messages)
    return []


def _break_glass_perm() -> Permission:
    return Permission.objects.get(codename=_CODENAME, content_type__app_label=_APP)


def person_snapshot(user: User) -> dict[str, Any]:
    """What a person may do, as audited and compared: `scopes` (role -> its queues) only
    when some role is held for named queues only."""
    snap: dict[str, Any] = {
        "username": user.get_username(),
        "roles": sorted(user.groups.filter(name__in=ROLE_NAMES).values_list("name", flat=True)),
        "break_glass": user.user_permissions.filter(
            codename=_CODENAME, content_type__app_label=_APP
        ).exists(),
        "active": user.is_active,
    }
    scopes = {
        s.role: sorted(s.queues) for s in RoleScope.objects.filter(user_id=user.pk).order_by("role")
    }
    if scopes:
        snap["scopes"] = scopes
    return snap


# -- roles held for named queues ("operator:payments") ------------------------------------

QUEUE_NAME = re.compile(r"^[-a-zA-Z0-9_]{1,100}$")  # a queue name is a slug


def grants_parsed(items: list[str]) -> tuple[list[str], dict[str, list[str]], bool]:
    """`role` (every queue), `role:queue` (that queue; repeat for several) and
    `break_glass`, as config as code and single sign-on mappings write them: the roles, the
    scopes (role -> queues) and break-glass. A role named both ways is held everywhere."""
    roles: set[str] = set()
    everywhere: set[str] = set()
    scopes: dict[str, set[str]] = {}
    break_glass = False
    for item in items:
        name, _, queue = item.strip().partition(":")
        if name == BREAK_GLASS and not queue:
            break_glass = True
            continue
        if name not in ROLE_NAMES:
            raise SettingsInvalid(
                {"roles": f"{name!r} is not a role ({', '.join(ROLE_NAMES)}, {BREAK_GLASS})"}
            )
        roles.add(name)
        if queue:
            scopes.setdefault(name, set()).add(queue)
        else:
            everywhere.add(name)
    listed = {role: sorted(q) for role, q in scopes.items() if role not in everywhere}
    return sorted(roles), listed, break_glass


def grants_listed(snapshot: dict[str, Any]) -> list[str]:
    """The inverse of `grants_parsed`, for export: `role` or `role:queue` entries."""
    scopes = snapshot.get("scopes", {})
    out: list[str] = []
    for role in snapshot["roles"]:
        out += [f"{role}:{q}" for q in scopes[role]] if role in scopes else [role]
    return out + ([BREAK_GLASS] if snapshot["break_glass"] else [])


def scopes_checked(roles: list[str], scopes: dict[str, list[str]]) -> dict[str, list[str]]:
    """A role is held for named queues only if it is held, may be scoped (never admin) and
    names at least one well-formed queue."""
    out: dict[str, list[str]] = {}
    for role, queues in scopes.items():
        if role not in roles:
            raise SettingsInvalid({"roles": f"{role!r} is scoped to queues but not held"})
        if Role(role) not in SCOPABLE_ROLES:
            raise SettingsInvalid(
                {"roles": f"{role!r} is held for every queue (it configures the installation)"}
            )
        if not queues or not all(isinstance(q, str) and QUEUE_NAME.match(q) for q in queues):
            raise SettingsInvalid({"roles": f"{role!r}: queue names are slugs, at least one"})
        out[role] = sorted(set(queues))
    return out


def _widened(role: str, before: dict[str, Any], target: dict[str, Any]) -> bool:
    """The target holds `role` in a queue the person could not act in before."""
    if role not in before["roles"]:
        return True
    was, will = before.get("scopes", {}).get(role), target.get("scopes", {}).get(role)
    return was is not None and (will is None or bool(set(will) - set(was)))


def _roles_checked(roles: list[str]) -> list[Group]:
    unknown = sorted(set(roles) - set(ROLE_NAMES))
    if unknown:
        raise SettingsInvalid({"roles": f"{unknown[0]!r} is not a role ({', '.join(ROLE_NAMES)})"})
    groups = list(Group.objects.filter(name__in=set(roles)))
    if len(groups) != len(set(roles)):
        raise SettingsInvalid({"roles": "role groups are missing; run `manage.py migrate`"})
    return groups


active_admins = active_admin_count


def admins_needed(four_eyes: bool) -> int:
    """Active admins that must remain: one, or two under four-eyes (someone must be able
    to decide another's proposal)."""
    return 2 if four_eyes else 1


def bootstrapping(actor: Actor) -> bool:
    """The shell making the first admins of an installation: with fewer than two active
    admins, nobody could decide a proposal, so a management command's change applies (and
    is audited as made without a second admin). Never a signed-in person."""
    return actor.user_id is None and active_admins() < 2


def set_password_link(user: User) -> str:
    """A one-time link with which the person chooses their own password (Django's
    password-reset token: it stops working once the password is set, or after
    PASSWORD_RESET_TIMEOUT)."""
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    token = default_token_generator.make_token(user)
    path = reverse("dashboard:password_set", args=[uid, token])
    return settings.LEASEBOARD_PUBLIC_URL + path


def _person_audited(
    actor: Actor,
    action: str,
    user: User | None,
    before: dict[str, Any] | None,
    after: dict[str, Any],
    request_id: str,
    reason: str = "",
    object_id: str = "",
) -> None:
    audited(
        Act.MANAGE_USERS,
        actor,
        action=action,
        object_type="user",
        object_id=object_id or str(user.pk if user is not None else ""),
        before=before,
        after=after,
        reason=reason,
        request_id=request_id,
    )


def _propose(
    kind: str,
    actor: Actor,
    *,
    subject: User | None,
    payload: dict[str, Any],
    summary: str,
    request_id: str,
) -> PolicyChange:
    try:
        with transaction.atomic():
            proposal = PolicyChange.objects.create(
                kind=kind,
                subject=subject,
                payload=payload,
                summary=summary[:300],
                requested_by_id=actor.user_id,
                requested_by_name=actor.name,
            )
    except IntegrityError:
        raise ValidationFailed(
            f"a change of this kind to {summary.split(':')[0]} already waits for a second admin"
        ) from None
    _person_audited(
        actor,
        "user.change_proposed",
        subject,
        None,
        {"change": proposal.pk, "kind": kind, **payload},
        request_id,
        reason=f"change {proposal.pk}: {proposal.summary}",
        object_id=str(subject.pk) if subject is not None else str(payload.get("username", "")),
    )
    return proposal


# -- creating a person ----------------------------------------------------------------------


@dataclass(frozen=True)
class NewPerson:
    user: User | None  # None: waiting for a second admin (`proposal`)
    link: str = ""  # the one-time set-password link, shown once ("" with a password given)
    proposal: PolicyChange | None = None


def _create_checked(
    username: str, roles: list[str], *, deciding: PolicyChange | None = None
) -> tuple[str, list[Group]]:
    username = (username or "").strip()
    errors: dict[str, str] = {}
    if not username or len(username) > 150:
        errors["username"] = "1 to 150 characters"
    elif get_user_model().objects.filter(username=username).exists():
        errors["username"] = (
            f"user {username!r} already exists; change roles with `manage.py user_role "
            f"{username} --add ROLE` or on the People page"
        )
    elif (
        PolicyChange.objects.filter(
            kind=PolicyChange.Kind.PERSON_CREATE, status="pending", payload__username=username
        )
        .exclude(pk=deciding.pk if deciding is not None else 0)
        .exists()
    ):
        errors["username"] = f"{username!r} is already proposed; a second admin decides it"
    if not roles:
        errors["roles"] = "at least one role"
    if errors:
        raise SettingsInvalid(errors)
    return username, _roles_checked(roles)


def _create_locked(
    username: str,
    email: str,
    groups: list[Group],
    password: str | None,
    scopes: dict[str, list[str]] | None = None,
) -> User:
    try:
        with transaction.atomic():
            user = get_user_model().objects.create_user(
                username=username, email=email, password=password
            )
    except IntegrityError:
        raise SettingsInvalid({"username": f"{username!r} exists"}) from None
    # Without a password, an unusable one (Django's create_user): until set through the link.
    user.groups.add(*groups)
    _scopes_written(user, scopes or {})
    return user


def _scopes_written(user: User, scopes: dict[str, list[str]]) -> None:
    RoleScope.objects.filter(user_id=user.pk).exclude(role__in=list(scopes)).delete()
    for role, queues in scopes.items():
        RoleScope.objects.update_or_create(user_id=user.pk, role=role, defaults={"queues": queues})


@transaction.atomic(durable=True)
def person_create(
    *,
    username: str,
    roles: list[str],
    email: str = "",
    actor: Actor,
    password: str | None = None,
    scopes: dict[str, list[str]] | None = None,
    request_id: str = "",
) -> NewPerson:
    """A new person in `roles` (each for every queue, or for the queues `scopes` names),
    who sets their own password through a one-time link (or, from the shell only, with
    `password`). Under four-eyes, a proposal."""
    authorize(Act.MANAGE_USERS, actor)
    username, groups = _create_checked(username, roles)
    scopes = scopes_checked(roles, scopes or {})
    if password is not None:
        problems = password_problems(password, username=username, email=email)
        if problems:
            raise SettingsInvalid({"password": "password refused: " + " ".join(problems)})
    four_eyes = four_eyes_on_locked()
    if four_eyes and not bootstrapping(actor):
        if password is not None:
            raise SettingsInvalid(
                {"password": "a proposal holds no password: the person sets theirs by link"}
            )
        payload = {
            "username": username,
            "email": email,
            "roles": sorted(set(roles)),
            "scopes": scopes,
        }
        proposal = _propose(
            PolicyChange.Kind.PERSON_CREATE,
            actor,
            subject=None,
            payload=payload,
            summary=f"new person {username}: {', '.join(payload['roles'])}",
            request_id=request_id,
        )
        return NewPerson(None, proposal=proposal)
    user = _create_locked(username, email, groups, password, scopes)
    _person_audited(
        actor,
        "user.create",
        user,
        None,
        person_snapshot(user),
        request_id,
        reason="four-eyes, but no second admin exists yet to decide" if four_eyes else "",
    )
    return NewPerson(user, "" if password is not None else set_password_link(user))


def person_create_apply_locked(change: PolicyChange, actor: Actor) -> NewPerson:
    """A second admin approved a new person: made now, with a link the approver hands over."""
    payload = change.payload
    username, groups = _create_checked(
        str(payload.get("username", "")), payload.get("roles", []), deciding=change
    )
    scopes = scopes_checked(payload.get("roles", []), payload.get("scopes", {}))
    user = _create_locked(username, str(payload.get("email", "")), groups, None, scopes)
    _person_audited(
        actor,
        "user.create",
        user,
        None,
        person_snapshot(user),
        "",
        reason=f"change {change.pk} by {change.requested_by_name}",
    )
    return NewPerson(user, set_password_link(user))


# -- roles, break-glass, sign-in --------------------------------------------------------


@dataclass(frozen=True)
class PersonChange:
    changed: bool  # False: nothing was different
    proposal: PolicyChange | None = None  # what gives power, waiting for a second admin


def _write_locked(user: User, state: dict[str, Any], *, before: dict[str, Any]) -> None:
    """Write the person's roles, break-glass and sign-in as `state` says, then refuse (the
    transaction rolls back) if that took away an admin who had to remain."""
    groups = _roles_checked(state["roles"])
    user.groups.remove(*Group.objects.filter(name__in=ROLE_NAMES).exclude(name__in=state["roles"]))
    user.groups.add(*groups)
    _scopes_written(user, state.get("scopes", {}))
    perm = _break_glass_perm()
    if state["break_glass"]:
        user.user_permissions.add(perm)
    else:
        user.user_permissions.remove(perm)
    if user.is_active != state["active"]:
        user.is_active = state["active"]
        user.save(update_fields=["is_active"])
    _admins_kept(four_eyes_on_locked(), user, before, state)


# The one writer of a person's roles, break-glass and sign-in (single sign-on uses it too).
write_person_locked = _write_locked


def _is_admin(state: dict[str, Any], user: User) -> bool:
    return bool(state["active"] and (Role.ADMIN.value in state["roles"] or user.is_superuser))


def _admins_kept(
    four_eyes: bool, user: User, before: dict[str, Any], after: dict[str, Any]
) -> None:
    """Refuse a change that takes an admin away below the admins that must remain."""
    if not _is_admin(before, user) or _is_admin(after, user):
        return
    needed = admins_needed(four_eyes)
    if active_admins() < needed:
        raise SettingsInvalid(
            {
                "roles": (
                    "this would leave no active admin; make someone else an admin first"
                    if needed == 1
                    else "under four-eyes two active admins must remain (one decides the "
                    "other's proposals); make another admin first, or turn four-eyes off"
                )
            }
        )


def person_update_locked(
    *,
    username: str,
    roles: list[str],
    break_glass: bool,
    active: bool = True,
    scopes: dict[str, list[str]] | None = None,
    actor: Actor,
    reason: str = "",
    request_id: str = "",
) -> PersonChange:
    """Set exactly these roles (each for every queue, or for the queues `scopes` names;
    None: the scopes they have), break-glass and sign-in; never one's own. Under four-eyes
    what takes power away applies now and what gives it (a role, a queue) is proposed."""
    authorize(Act.MANAGE_USERS, actor)
    user = user_locked(username)
    authorize(Act.MANAGE_USERS, actor, subject_user_id=user.pk)
    _roles_checked(roles)
    before = person_snapshot(user)
    if scopes is None:
        scopes = {r: q for r, q in before.get("scopes", {}).items() if r in roles}
    scopes = scopes_checked(roles, scopes)
    target = {**before, "roles": sorted(set(roles)), "break_glass": break_glass, "active": active}
    target.pop("scopes", None)
    if scopes:
        target["scopes"] = scopes
    if target == before:
        return PersonChange(False)
    add_roles: list[str] = sorted(set(target["roles"]) - set(before["roles"]))
    # A role given, or held in more queues than before: both give power.
    widened = {r: scopes.get(r) for r in target["roles"] if _widened(r, before, target)}
    grant_break_glass = bool(target["break_glass"] and not before["break_glass"])
    grant_sign_in = bool(target["active"] and not before["active"])
    grants: dict[str, Any] = {
        "add_roles": add_roles,
        "break_glass": grant_break_glass,
        "active": grant_sign_in,
    }
    # Queues given: a role added for named queues, or a role held in more queues.
    scope_grants = {r: q for r, q in widened.items() if q is not None or r not in add_roles}
    if scope_grants:
        grants["scopes"] = scope_grants
    four_eyes = four_eyes_on_locked()
    proposing = four_eyes and any(grants.values()) and not bootstrapping(actor)
    now = target
    if proposing:  # only what takes power away, now
        kept = sorted(set(target["roles"]) & set(before["roles"]))
        was = before.get("scopes", {})
        # A role kept: its narrower scope now; a widened one keeps its old scope for now.
        now_scopes = {
            r: was[r] if r in widened else scopes[r]
            for r in kept
            if (r in widened and r in was) or (r not in widened and r in scopes)
        }
        now = {
            **target,
            "roles": kept,
            "break_glass": target["break_glass"] and before["break_glass"],
            "active": target["active"] and before["active"],
        }
        now.pop("scopes", None)
        if now_scopes:
            now["scopes"] = now_scopes
    if now != before:
        _write_locked(user, now, before=before)
        _person_audited(
            actor, "user.update", user, before, person_snapshot(user), request_id, reason=reason
        )
    if not proposing:
        return PersonChange(True)
    wanted = [f"+{r}" + (f":{','.join(q)}" if q else "") for r, q in widened.items()]
    wanted += ["+break_glass"] * grant_break_glass + ["+sign-in"] * grant_sign_in
    proposal = _propose(
        PolicyChange.Kind.PERSON,
        actor,
        subject=user,
        payload=grants,
        summary=f"person {username}: {' '.join(wanted)}" + (f" ({reason})" if reason else ""),
        request_id=request_id,
    )
    return PersonChange(True, proposal)


# The same act as its own outermost transaction (the settings page's form).
person_update = transaction.atomic(durable=True)(person_update_locked)


def person_grants_apply_locked(change: PolicyChange, actor: Actor) -> None:
    """A second admin approved what a change gives a person, on top of what they have now."""
    assert change.subject is not None
    user = user_locked(change.subject.get_username())
    before = person_snapshot(user)
    grants = change.payload
    roles = sorted(set(before["roles"]) | set(grants.get("add_roles", [])))
    scopes = dict(before.get("scopes", {}))
    for role, queues in grants.get("scopes", {}).items():  # None: every queue
        if role not in roles:
            continue  # taken away since it was proposed
        if queues is None:
            scopes.pop(role, None)
        else:
            scopes[role] = queues
    after = {
        **before,
        "roles": roles,
        "break_glass": before["break_glass"] or bool(grants.get("break_glass")),
        "active": before["active"] or bool(grants.get("active")),
        "scopes": scopes_checked(roles, scopes),
    }
    _write_locked(user, after, before=before)
    _person_audited(
        actor,
        "user.update",
        user,
        before,
        person_snapshot(user),
        "",
        reason=f"change {change.pk} by {change.requested_by_name}",
    )


# -- passwords ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PasswordReset:
    link: str = ""  # the one-time set-password link ("" while proposed)
    proposal: PolicyChange | None = None


def _reset_locked(user: User, actor: Actor, request_id: str, reason: str = "") -> str:
    # The old password stops working now, and with it every session it opened.
    user.set_unusable_password()
    user.save(update_fields=["password"])
    _person_audited(
        actor,
        "user.password_reset",
        user,
        {"username": user.get_username()},
        {"username": user.get_username(), "password": "(unusable until set by link)"},
        request_id,
        reason=reason,
    )
    return set_password_link(user)


@transaction.atomic(durable=True)
def person_password_reset(*, username: str, actor: Actor, request_id: str = "") -> PasswordReset:
    """The person's password stops working; they choose a new one through a one-time link
    (never shown to anyone as a password). Never one's own; under four-eyes a proposal."""
    authorize(Act.MANAGE_USERS, actor)
    user = user_locked(username)
    authorize(Act.MANAGE_USERS, actor, subject_user_id=user.pk)
    if four_eyes_on_locked() and not bootstrapping(actor):
        proposal = _propose(
            PolicyChange.Kind.PASSWORD_RESET,
            actor,
            subject=user,
            payload={},
            summary=f"password of {username}: reset, set again by a one-time link",
            request_id=request_id,
        )
        return PasswordReset(proposal=proposal)
    return PasswordReset(_reset_locked(user, actor, request_id))


def password_reset_apply_locked(change: PolicyChange, actor: Actor) -> PasswordReset:
    assert change.subject is not None
    user = user_locked(change.subject.get_username())
    reason = f"change {change.pk} by {change.requested_by_name}"
    return PasswordReset(_reset_locked(user, actor, "", reason=reason))
