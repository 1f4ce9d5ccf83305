"""Sign-in failures and lock-outs in the audit log. Connected in CoreConfig.ready():
Django's `user_login_failed` always; django-axes' `user_locked_out` when axes is
installed. Another integration that locks people out calls `audit_locked_out` itself."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.contrib.auth.signals import user_login_failed
from django.db import transaction
from django.http import HttpRequest

from leaseboard.core.clock import db_now_ms
from leaseboard.core.services.audit import audit_record

# Set on a request whose sign-in was refused because a lock-out was already in force (the
# sign-in backend sets it): such an attempt was already recorded as the lock-out, so an
# anonymous flood during a lock-out cannot grow the audit log.
ATTEMPT_WHILE_LOCKED = "leaseboard_attempt_while_locked"


def _while_locked(request: HttpRequest | None) -> bool:
    return bool(getattr(request, ATTEMPT_WHILE_LOCKED, False))


def _client_ip(request: HttpRequest | None) -> str:
    return str(request.META.get("REMOTE_ADDR", "")) if request is not None else ""


def audit_sign_in_failed(*, username: str, ip_address: str = "") -> None:
    with transaction.atomic():
        audit_record(
            at_ms=db_now_ms(),
            actor_name="anonymous",
            actor_role="anonymous",
            action="auth.sign_in_failed",
            object_type="user",
            object_id=username[:200],
            after={"ip": ip_address[:64]},
        )


def audit_locked_out(*, username: str, ip_address: str = "", source: str = "axes") -> None:
    """Record that sign-in was locked for a username/address (by `source`)."""
    with transaction.atomic():
        audit_record(
            at_ms=db_now_ms(),
            actor_name=source[:150],
            actor_role="system",
            action="auth.locked_out",
            object_type="user",
            object_id=(username or "")[:200],
            after={"ip": (ip_address or "")[:64]},
        )


def on_user_login_failed(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    if _while_locked(request):
        return
    username = str(credentials.get("username") or "")
    audit_sign_in_failed(username=username, ip_address=_client_ip(request))


# deliberate: the signal's receiver signature (django-axes sends these keywords).
def on_axes_locked_out(
    sender: Any,
    request: HttpRequest | None = None,
    username: str | None = None,
    ip_address: str | None = None,
    **kwargs: Any,
) -> None:
    if _while_locked(request):
        return
    audit_locked_out(
        username=str(username or ""), ip_address=str(ip_address or _client_ip(request))
    )


def connect_sign_in_audit() -> None:
    user_login_failed.connect(on_user_login_failed, dispatch_uid="leaseboard.audit.login_failed")
    if apps.is_installed("axes"):
        from axes.signals import user_locked_out

        user_locked_out.connect(on_axes_locked_out, dispatch_uid="leaseboard.audit.locked_out")
