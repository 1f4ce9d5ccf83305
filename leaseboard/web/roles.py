"""Human roles (auth groups) and the server-side checks every view uses, whatever app it
belongs to: `@role_required("operator")` gates a page; `acting(request)` gives a service
call its actor and request id. Whether the act itself is allowed is the core authority's
answer (leaseboard.core.authority), never the page's.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBase

from leaseboard.core.authority import Actor
from leaseboard.core.authority import user_roles as core_user_roles
from leaseboard.domain.authority import Role

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # the project's user model (Django's own)

OPERATOR = Role.OPERATOR.value
APPROVER = Role.APPROVER.value
MANAGER = Role.MANAGER.value
ADMIN = Role.ADMIN.value
ROLES = tuple(role.value for role in Role)
# Every role may read the supervision pages; actions name their own roles.
VIEWER_ROLES = ROLES

_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def user_roles(request: HttpRequest) -> frozenset[str]:
    """The request user's roles, read once per request (one query)."""
    cached = getattr(request, "_leaseboard_roles", None)
    if cached is not None:
        return cached
    roles = frozenset(role.value for role in core_user_roles(request.user))
    request._leaseboard_roles = roles  # type: ignore[attr-defined]
    return roles


def has_role(request: HttpRequest, *roles: str) -> bool:
    return bool(user_roles(request) & set(roles))


def request_id(request: HttpRequest) -> str:
    """The caller's X-Request-ID when well-formed, else a fresh one (kept on the request)."""
    rid = getattr(request, "_leaseboard_request_id", None)
    if rid is None:
        raw = request.headers.get("X-Request-ID", "")
        rid = raw if _REQUEST_ID_RE.match(raw) else uuid.uuid4().hex
        request._leaseboard_request_id = rid  # type: ignore[attr-defined]
    return rid


def signed_in_user(request: HttpRequest) -> User:
    """The signed-in user of a view behind `role_required`, which has sent anyone else to
    sign in (refused here too, should a view forget it)."""
    user = request.user
    if not user.is_authenticated:
        raise PermissionDenied("sign in first")
    return user


def acting(request: HttpRequest) -> dict[str, Any]:
    """Who acts (roles read from the database, never from the form) and the request id:
    the keyword arguments every service write takes."""
    return {"actor": Actor.human(request.user), "request_id": request_id(request)}


View = Callable[..., HttpResponseBase]


def role_required(*roles: str) -> Callable[[View], View]:
    """Sign-in, then one of `roles`; otherwise 403. Checked on the server for every call,
    whatever the page shows."""
    if not roles or any(r not in ROLES for r in roles):
        raise ValueError(f"roles must be among {ROLES}, got {roles}")

    def decorator(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if not request.user.is_authenticated:
                if request.headers.get("HX-Request"):
                    # A polled fragment after the session ended: send the page to sign-in.
                    response = HttpResponse(status=401)
                    response["HX-Redirect"] = settings.LOGIN_URL
                    return response
                return redirect_to_login(request.get_full_path())
            if not has_role(request, *roles):
                raise PermissionDenied(f"needs the role {' or '.join(roles)}")
            return view(request, *args, **kwargs)

        wrapped.required_roles = roles  # type: ignore[attr-defined]
        return wrapped

    return decorator
