"""The server-side gates every view uses, whatever app it belongs to, asked of the one
authority table (docs/design.md §9): `@act_required(Act.REVOKE)` gates a page by the act it
performs; `can(request)` (in every template as `can`: `{% if can.revoke %}`) says what the
person may do somewhere; `acting(request)` gives a service call its actor and request id.
Whether the act itself is allowed, on this work item in its queue, is the core authority's
answer when the service decides it, never the page's. No view or template names a role
(tests/architecture/test_gates.py).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import replace
from functools import wraps
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBase

from leaseboard.core.authority import BREAK_GLASS_PERMISSION, Actor, may_ever
from leaseboard.domain.authority import RULES, Act, Party, Role

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # the project's user model (Django's own)

_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def gate_actor(request: HttpRequest) -> Actor:
    """The request user as the gates see them (roles and their queues: one query), read
    once per request."""
    cached = getattr(request, "_leaseboard_gate_actor", None)
    if cached is None:
        cached = Actor.gate(request.user)
        request._leaseboard_gate_actor = cached  # type: ignore[attr-defined]
    return cached


def visible_queues(request: HttpRequest) -> frozenset[str] | None:
    """The queues whose work this person is shown: every queue (None) unless
    LEASEBOARD_HIDE_OTHER_QUEUES is on and all their roles are held for named queues
    only, then those queues."""
    actor = gate_actor(request)
    if not settings.LEASEBOARD_HIDE_OTHER_QUEUES or not actor.scoped:
        return None
    if any(role not in actor.role_queues for role in actor.roles):
        return None  # a role held for every queue sees every queue
    return frozenset().union(*actor.role_queues.values())


def user_roles(request: HttpRequest) -> frozenset[str]:
    """The names of the request user's roles, to show them (the header, the 403 page);
    never to decide anything."""
    return frozenset(role.value for role in gate_actor(request).roles)


def _actor_for(request: HttpRequest, act: Act) -> Actor:
    actor = gate_actor(request)
    if act is Act.BREAK_GLASS and request.user.is_authenticated:  # the permission, only then
        held = bool(request.user.is_active) and request.user.has_perm(BREAK_GLASS_PERMISSION)
        actor = replace(actor, break_glass=held)
    return actor


def may(request: HttpRequest, act: Act, queue: str | None = None) -> bool:
    """The table's answer: may this person do `act` in some queue (or in `queue`)?"""
    return may_ever(act, _actor_for(request, act), queue=queue)


class Can:
    """`can.revoke`, `can.request_takeover`...: the table's answer per act, each asked
    once; `can.in_queue(name)` (in templates `can|in_queue:name`) answers for work in one
    queue, where a person whose roles are scoped to queues may act or may not."""

    def __init__(self, request: HttpRequest, queue: str | None = None) -> None:
        self._request = request
        self._queue = queue
        self._answers: dict[Act, bool] = {}
        self._queues: dict[str, Can] = {}

    def __getitem__(self, name: str) -> bool:
        try:
            act = Act(name)
        except ValueError:
            raise KeyError(name) from None  # a misspelt act is a template error, not "no"
        if act not in self._answers:
            self._answers[act] = may(self._request, act, self._queue)
        return self._answers[act]

    def in_queue(self, queue: str) -> Can:
        if queue not in self._queues:
            self._queues[queue] = Can(self._request, queue)
        return self._queues[queue]

    @property
    def scoped(self) -> bool:
        """Whether some of the person's roles hold for named queues only."""
        return gate_actor(self._request).scoped


def can(request: HttpRequest) -> Can:
    """The request's `Can` (the context processor puts it in every template)."""
    cached = getattr(request, "_leaseboard_can", None)
    if cached is None:
        cached = Can(request)
        request._leaseboard_can = cached  # type: ignore[attr-defined]
    return cached


def can_context(request: HttpRequest) -> dict[str, Any]:
    """Context processor: `can` in every template."""
    return {"can": can(request)}


def request_id(request: HttpRequest) -> str:
    """The caller's X-Request-ID when well-formed, else a fresh one (kept on the request)."""
    rid = getattr(request, "_leaseboard_request_id", None)
    if rid is None:
        raw = request.headers.get("X-Request-ID", "")
        rid = raw if _REQUEST_ID_RE.match(raw) else uuid.uuid4().hex
        request._leaseboard_request_id = rid  # type: ignore[attr-defined]
    return rid


def signed_in_user(request: HttpRequest) -> User:
    """The signed-in user of a view behind `act_required`, which has sent anyone else to
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


def roles_allowed(*acts: Act) -> list[str]:
    """The roles the table lets do any of `acts` (standing is acted on as an operator),
    to tell a refused person which one to ask for."""
    allow = set().union(*(RULES[act].allow for act in acts))
    if Party.STANDING in allow:
        allow.add(Party.OPERATOR)
    return [role.value for role in Role if Party(role.value) in allow] or ["(none)"]


def act_required(*acts: Act) -> Callable[[View], View]:
    """Sign-in, then the table must let the person do one of `acts` somewhere; otherwise
    403. Checked on the server for every call, whatever the page shows; the service then
    decides the act on its object (its queue, its lease) again."""
    if not acts or not all(isinstance(a, Act) for a in acts):
        raise ValueError(f"acts must be Act members, got {acts}")

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
            if not any(may(request, act) for act in acts):
                raise PermissionDenied(f"needs the role {' or '.join(roles_allowed(*acts))}")
            return view(request, *args, **kwargs)

        wrapped.required_acts = acts  # type: ignore[attr-defined]
        return wrapped

    return decorator
