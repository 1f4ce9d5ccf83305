"""Human roles (auth groups) and the server-side checks every view uses, whatever app it
belongs to: `@role_required("operator")` on a view, `acting_role(request, "approver")` for
the role written to the audit log, `actor(request, role)` for a service call's audit
fields (user, role, request id).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

OPERATOR = "operator"
APPROVER = "approver"
MANAGER = "manager"
ROLES = (OPERATOR, APPROVER, MANAGER)
# Every role may read the supervision pages; actions name their own roles.
VIEWER_ROLES = ROLES

_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def user_roles(request: HttpRequest) -> frozenset[str]:
    """The request user's roles, read once per request (one query)."""
    cached = getattr(request, "_leaseboard_roles", None)
    if cached is not None:
        return cached
    user = request.user
    if not user.is_authenticated or not user.is_active:
        roles: frozenset[str] = frozenset()
    elif user.is_superuser:
        roles = frozenset(ROLES)
    else:
        roles = frozenset(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
    request._leaseboard_roles = roles  # type: ignore[attr-defined]
    return roles


def has_role(request: HttpRequest, *roles: str) -> bool:
    return bool(user_roles(request) & set(roles))


def acting_role(request: HttpRequest, *allowed: str) -> str:
    """The role an action is taken in: the first of `allowed` the user holds."""
    held = user_roles(request)
    for role in allowed:
        if role in held:
            return role
    raise PermissionDenied("no role for this action")


def request_id(request: HttpRequest) -> str:
    """The caller's X-Request-ID when well-formed, else a fresh one (kept on the request)."""
    rid = getattr(request, "_leaseboard_request_id", None)
    if rid is None:
        raw = request.headers.get("X-Request-ID", "")
        rid = raw if _REQUEST_ID_RE.match(raw) else uuid.uuid4().hex
        request._leaseboard_request_id = rid  # type: ignore[attr-defined]
    return rid


def actor(request: HttpRequest, *allowed: str) -> dict[str, Any]:
    """Who acts, in which role and under which request id: the keyword arguments every
    service write takes for its audit entry."""
    return {
        "user": request.user,
        "role": acting_role(request, *allowed),
        "request_id": request_id(request),
    }


View = Callable[..., HttpResponse]


def role_required(*roles: str) -> Callable[[View], View]:
    """Sign-in, then one of `roles`; otherwise 403. Checked on the server for every call,
    whatever the page shows."""
    if not roles or any(r not in ROLES for r in roles):
        raise ValueError(f"roles must be among {ROLES}, got {roles}")

    def decorator(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
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
