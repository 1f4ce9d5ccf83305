"""How the browser is told an act was refused, the same way on every page: refusals about
who you are (`forbidden`, `not_holder`) are the 403 page, like a missing role; anything
else (a stale epoch, an ended lease, bad input) is a message on the page you came from."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from leaseboard.domain.authority import IDENTITY_CODES as WHO_YOU_ARE
from leaseboard.domain.errors import LeaseboardError


def refusal_text(exc: LeaseboardError, prefix: str = "") -> str:
    """The words shown for a refusal; the stable code in brackets for support."""
    return f"{prefix}{exc.detail} ({exc.code})"


def refuse(request: HttpRequest, exc: LeaseboardError, prefix: str = "") -> None:
    """Raise the 403 page for a refusal of the actor, else queue the refusal as a message."""
    if exc.code in WHO_YOU_ARE:
        raise PermissionDenied(exc.detail)
    messages.error(request, refusal_text(exc, prefix))


def refused_for_form(exc: LeaseboardError) -> str:
    """For a form: raise the 403 page for a refusal of the actor, else the form error."""
    if exc.code in WHO_YOU_ARE:
        raise PermissionDenied(exc.detail)
    return refusal_text(exc)
