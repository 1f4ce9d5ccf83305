"""The last-admin guard and the one writer of a person's roles, break-glass and sign-in.

Every path that changes what a person may do (the settings page, the shell, `config
apply`, single sign-on, a second admin's approval) writes through `write_person_locked`,
which refuses (rolling the transaction back) a change that leaves fewer active admins than
must remain: one, or two under four-eyes (someone must be able to decide another's
proposal). `bootstrapping` is the one exception to four-eyes: the shell making the first
admins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.auth.models import Group

from leaseboard.core.authority import Actor
from leaseboard.core.models import RoleScope
from leaseboard.domain.authority import ROLE_NAMES, Role
from leaseboard.policy.services.common import SettingsInvalid
from leaseboard.policy.services.four_eyes import active_admin_count, four_eyes_on_locked
from leaseboard.policy.services.people.grants import roles_checked
from leaseboard.policy.services.people.records import break_glass_perm

if TYPE_CHECKING:
    from django.contrib.auth.models import User

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


def _is_admin(state: dict[str, Any], user: User) -> bool:
    return bool(state["active"] and (Role.ADMIN.value in state["roles"] or user.is_superuser))


def admins_kept(four_eyes: bool, user: User, before: dict[str, Any], after: dict[str, Any]) -> None:
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


def scopes_written(user: User, scopes: dict[str, list[str]]) -> None:
    """The person's roles held for named queues, exactly `scopes` (role -> queues)."""
    RoleScope.objects.filter(user_id=user.pk).exclude(role__in=list(scopes)).delete()
    for role, queues in scopes.items():
        RoleScope.objects.update_or_create(user_id=user.pk, role=role, defaults={"queues": queues})


def write_person_locked(user: User, state: dict[str, Any], *, before: dict[str, Any]) -> None:
    """Write the person's roles, break-glass and sign-in as `state` says, then refuse (the
    transaction rolls back) if that took away an admin who had to remain. The one writer
    of what a person may do (single sign-on uses it too)."""
    groups = roles_checked(state["roles"])
    user.groups.remove(*Group.objects.filter(name__in=ROLE_NAMES).exclude(name__in=state["roles"]))
    user.groups.add(*groups)
    scopes_written(user, state.get("scopes", {}))
    perm = break_glass_perm()
    if state["break_glass"]:
        user.user_permissions.add(perm)
    else:
        user.user_permissions.remove(perm)
    if user.is_active != state["active"]:
        user.is_active = state["active"]
        user.save(update_fields=["is_active"])
    admins_kept(four_eyes_on_locked(), user, before, state)
