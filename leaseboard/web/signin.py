"""Sign-in throttling as the dashboard applies it: django-axes counts failed sign-ins, and
locks out a person at one address (the (username, address) pair) after
LEASEBOARD_SIGNIN_FAILURE_LIMIT failures, and an address as a whole only after the far
higher LEASEBOARD_SIGNIN_ADDRESS_FAILURE_LIMIT: one person's failures (they stop counting
once that person is locked out) never lock out the others behind the same address, such as
every supervisor behind a proxy. This module is the handler that counts so, the backend
that enforces a lock-out and the page a locked-out person sees.
"""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.exceptions import AxesBackendPermissionDenied
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_cool_off, get_failure_limit
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from leaseboard.core.services.signin_audit import ATTEMPT_WHILE_LOCKED

# AXES_LOCKOUT_PARAMETERS' order (settings/security.py): the person at the address, then
# the address.
PERSON, ADDRESS = 0, 1


class SignInThrottleHandler(AxesDatabaseHandler):
    """Two limits where axes has one: the person's at one address (AXES_FAILURE_LIMIT), and
    the address's over everyone (LEASEBOARD_SIGNIN_ADDRESS_FAILURE_LIMIT), which reports
    the person's limit as reached only when the address's is."""

    def get_failures(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> int:
        person, address = (
            attempts.aggregate(n=Sum("failures_since_start"))["n"] or 0
            for attempts in self.get_user_attempts(request, credentials)
        )
        request.signin_address_locked = address >= settings.LEASEBOARD_SIGNIN_ADDRESS_FAILURE_LIMIT  # type: ignore[attr-defined]
        if request.signin_address_locked:  # type: ignore[attr-defined]
            return max(int(person), int(get_failure_limit(request, credentials)))
        return int(person)

    def reset_user_attempts(
        self, request: HttpRequest, credentials: dict[str, Any] | None = None
    ) -> int:
        """A successful sign-in forgets that person's failures at that address only: one
        account's success must not wipe what an address guessed at other accounts."""
        attempts = self.get_user_attempts(request, credentials)[PERSON]
        count, _ = AccessAttempt.objects.filter(id__in=attempts.values("id")).delete()
        return int(count)


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
    address = bool(getattr(request, "signin_address_locked", False))
    limit = (
        settings.LEASEBOARD_SIGNIN_ADDRESS_FAILURE_LIMIT if address else settings.AXES_FAILURE_LIMIT
    )
    response = render(
        request,
        "registration/locked_out.html",
        {"failure_limit": limit, "cool_off_minutes": minutes, "address": address},
        status=429,
    )
    if cool_off:
        response["Retry-After"] = str(int(cool_off.total_seconds()))
    return response
