"""Sign-in throttling as the dashboard applies it: django-axes counts failed sign-ins per
account and per address (settings: AXES_*, from LEASEBOARD_SIGNIN_*); this module is the
backend that enforces a lock-out and the page a locked-out person sees.
"""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.exceptions import AxesBackendPermissionDenied
from axes.helpers import get_cool_off
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from leaseboard.core.services.signin_audit import ATTEMPT_WHILE_LOCKED


class SignInThrottleBackend(AxesStandaloneBackend):
    """Refuses a locked-out account or address before its password is checked. Callers
    that pass no request (the shell, management commands) are not signing in through the
    web and are left to the next backend."""

    def authenticate(  # type: ignore[override]
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if request is None:
            return None
        try:
            return super().authenticate(request, username=username, password=password, **kwargs)
        except AxesBackendPermissionDenied:
            setattr(request, ATTEMPT_WHILE_LOCKED, True)  # audited once, as the lock-out
            raise


def locked_out(
    request: HttpRequest,
    original_response: HttpResponse | None = None,
    credentials: dict[str, Any] | None = None,
) -> HttpResponse:
    """The lock-out page: 429 with Retry-After and a plain explanation."""
    cool_off = get_cool_off(request)
    minutes = max(1, round(cool_off.total_seconds() / 60)) if cool_off else None
    response = render(
        request,
        "registration/locked_out.html",
        {"failure_limit": settings.AXES_FAILURE_LIMIT, "cool_off_minutes": minutes},
        status=429,
    )
    if cool_off:
        response["Retry-After"] = str(int(cool_off.total_seconds()))
    return response
