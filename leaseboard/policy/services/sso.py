"""Single sign-on, the people side (docs/design.md §9): a person signed in by the identity
provider is found by (issuer, subject) — never by a username or an email, which the
provider may reuse or an attacker may choose — created on their first sign-in, and given
exactly the roles their groups map to (`[sso.groups]` in config as code), re-evaluated
at every sign-in. Each sign-in is audited with the provider and the subject. The roles are
written by the people module's one writer, so the last-admin guard holds here too.

The protocol (discovery, PKCE, state, nonce, the token's signature) is
leaseboard.policy.views.sso's, with mozilla-django-oidc.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from leaseboard.core.clock import db_now_ms
from leaseboard.core.services.audit import audit_record
from leaseboard.policy.models import SignInPolicy, SsoGroup, SsoIdentity
from leaseboard.policy.services import people

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def sign_in_policy() -> SignInPolicy:
    return SignInPolicy.objects.filter(id=1).first() or SignInPolicy()


def local_passwords_allowed() -> bool:
    return sign_in_policy().local_passwords


@dataclass(frozen=True)
class Grants:
    roles: list[str]
    scopes: dict[str, list[str]]
    break_glass: bool


def grants_for_groups(groups: list[str]) -> Grants:
    """What the mapped groups give, together: a role held everywhere by one group is held
    everywhere; queues add up. Unmapped groups give nothing."""
    items: list[str] = []
    for mapping in SsoGroup.objects.filter(name__in=groups).order_by("name"):
        items += list(mapping.grants)
    roles, scopes, break_glass = people.grants_parsed(items)
    return Grants(roles, people.scopes_checked(roles, scopes), break_glass)


def groups_of(claims: dict[str, Any], claim: str) -> list[str]:
    value = claims.get(claim, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return sorted({g for g in value if isinstance(g, str) and 0 < len(g) <= 200})


_USERNAME_BAD = re.compile(r"[^\w.@+-]")


def _new_username(claims: dict[str, Any], subject: str) -> str:
    """The provider's preferred username (or the email's local part), made a valid Django
    username; suffixed with the subject when a person of that name exists already (a
    local account is never taken over by a provider's user of the same name)."""
    wanted = str(claims.get("preferred_username") or str(claims.get("email", "")).split("@")[0])
    base = _USERNAME_BAD.sub("-", wanted)[:100] or "sso"
    model = get_user_model()
    if not model.objects.filter(username=base).exists():
        return base
    return f"{base}-{_USERNAME_BAD.sub('-', subject)[:40]}"


@transaction.atomic(durable=True)
def person_sso_sign_in(
    *, issuer: str, subject: str, claims: dict[str, Any], ip_address: str = ""
) -> User:
    """The person the provider signed in: found by (issuer, subject), or created; their
    roles set to what their groups give now; audited with the provider and the subject."""
    policy = sign_in_policy()
    groups = groups_of(claims, policy.groups_claim)
    grants = grants_for_groups(groups)
    identity = (
        SsoIdentity.objects.select_for_update(no_key=True)
        .select_related("user")
        .filter(issuer=issuer, subject=subject)
        .first()
    )
    created = identity is None
    if identity is None:
        user = get_user_model().objects.create_user(
            username=_new_username(claims, subject), email=str(claims.get("email", ""))[:254]
        )  # an unusable password: this person signs in through the provider only
        identity = SsoIdentity.objects.create(user=user, issuer=issuer, subject=subject)
    user = people.user_locked(identity.user.get_username())
    before = people.person_snapshot(user)
    after = {
        **before,
        "roles": grants.roles,
        "break_glass": grants.break_glass,
    }
    after.pop("scopes", None)
    if grants.scopes:
        after["scopes"] = grants.scopes
    if after != before:
        people.write_person_locked(user, after, before=before)
    identity.last_sign_in_at = timezone.now()
    identity.save(update_fields=["last_sign_in_at"])
    audit_record(
        at_ms=db_now_ms(),
        actor_name=user.get_username(),
        actor_user_id=user.pk,
        actor_role="sso",
        action="auth.sso_sign_in",
        object_type="user",
        object_id=str(user.pk),
        before=before if not created else {},
        after={
            **people.person_snapshot(user),
            "provider": issuer,
            "subject": subject,
            "groups": groups,
            "created": created,
            "ip": ip_address[:64],
        },
    )
    return user
