"""OpenID Connect sign-in, with mozilla-django-oidc (docs/design.md §9).

Why that library: it is the relying-party half only (no account framework of its own to
keep apart from ours, unlike django-allauth), small enough to read (about 1,000 lines),
maintained by Mozilla, and does the protocol's security work: the authorization code flow
with `state` and `nonce` kept in the session, PKCE (S256), the ID token's signature checked
against the provider's JWKS, and logout. What it leaves to us, done here: discovery (the
endpoints are read from the issuer's `/.well-known/openid-configuration`, once per
process), the ID token's issuer, audience and expiry, matching a person by (issuer,
subject) rather than by email, and roles from the groups claim
(leaseboard.policy.services.sso).

The provider is configured by the environment (LEASEBOARD_OIDC_ISSUER, _CLIENT_ID,
_CLIENT_SECRET, _SCOPES, _PROVIDER_NAME); the group mappings and whether local passwords
still work by config as code (`[sso]`).
"""

from __future__ import annotations

import time
from functools import cache
from typing import Any
from urllib.parse import urlencode

import requests
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.http import Http404, HttpRequest
from django.urls import reverse
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
    OIDCLogoutView,
)

from leaseboard.domain.errors import LeaseboardError
from leaseboard.policy.services import sso

# mozilla-django-oidc's settings that name a provider endpoint, and the discovery keys.
ENDPOINTS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
    "OIDC_OP_LOGOUT_ENDPOINT": "end_session_endpoint",
}


def enabled() -> bool:
    return bool(settings.LEASEBOARD_OIDC_ISSUER)


@cache
def discovery(issuer: str) -> dict[str, Any]:
    """The provider's metadata (OpenID Connect Discovery 1.0), read once per process. Its
    `issuer` must be the configured one, exactly (a mix-up defence)."""
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    response = requests.get(url, timeout=settings.LEASEBOARD_OIDC_TIMEOUT_S)
    response.raise_for_status()
    doc = response.json()
    if doc.get("issuer") != issuer:
        raise ImproperlyConfigured(f"{url} names issuer {doc.get('issuer')!r}, not {issuer!r}")
    if "S256" not in doc.get("code_challenge_methods_supported", ["S256"]):
        raise ImproperlyConfigured(f"{issuer} does not support PKCE with S256")
    return doc


def oidc_setting(attr: str, *default: Any) -> Any:
    """mozilla-django-oidc's settings, with the endpoints from discovery."""
    if attr in ENDPOINTS:
        value = discovery(settings.LEASEBOARD_OIDC_ISSUER).get(ENDPOINTS[attr])
        if value is None and not default:
            raise ImproperlyConfigured(f"the provider's metadata has no {ENDPOINTS[attr]}")
        return value if value is not None else default[0]
    value = getattr(settings, attr, None)
    if value is not None:
        return value
    if default:
        return default[0]
    raise ImproperlyConfigured(f"setting {attr} not found")


class LocalPasswordBackend(ModelBackend):
    """Django's password sign-in, unless `[sso] local_passwords = false`."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Any:
        if not sso.local_passwords_allowed():
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


class LeaseboardOIDCBackend(OIDCAuthenticationBackend):
    """The code flow's end: the tokens checked, the person found by (issuer, subject) and
    their roles set from their groups."""

    get_settings = staticmethod(oidc_setting)  # type: ignore[assignment]

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        payload = super().verify_token(token, **kwargs)  # signature (JWKS) and nonce
        issuer = settings.LEASEBOARD_OIDC_ISSUER
        audience = payload.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if payload.get("iss") != issuer:
            raise SuspiciousOperation("the ID token is not from the configured issuer")
        if settings.LEASEBOARD_OIDC_CLIENT_ID not in audiences:
            raise SuspiciousOperation("the ID token is not for this client")
        if not isinstance(payload.get("exp"), int) or payload["exp"] < time.time() - 60:
            raise SuspiciousOperation("the ID token has expired")
        if not payload.get("sub"):
            raise SuspiciousOperation("the ID token names no subject")
        self._subject = str(payload["sub"])
        return payload

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict) -> Any:
        claims = self.get_userinfo(access_token, id_token, payload)
        if str(claims.get("sub", "")) != self._subject:  # OIDC Core 5.3.2
            raise SuspiciousOperation("the userinfo is about someone else")
        merged = {**payload, **claims}
        try:
            return sso.person_sso_sign_in(
                issuer=settings.LEASEBOARD_OIDC_ISSUER,
                subject=self._subject,
                claims=merged,
                ip_address=str(self.request.META.get("REMOTE_ADDR", "")),
            )
        except LeaseboardError as exc:
            # The roles could not be written (the last admin's group taken away, a mapping
            # gone bad): no sign-in, nothing changed; the library answers login failure.
            raise SuspiciousOperation(f"sign-in refused: {exc.detail}") from exc

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        if not enabled() or request is None or "code" not in request.GET:
            return None  # a password sign-in: not ours
        return super().authenticate(request, **kwargs)


class _OnlyWhenEnabled:
    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        if not enabled():
            raise Http404("single sign-on is not configured")
        return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]


class SignInStart(_OnlyWhenEnabled, OIDCAuthenticationRequestView):
    """Redirect to the provider, with state, nonce and a PKCE challenge in the session."""

    get_settings = staticmethod(oidc_setting)  # type: ignore[assignment]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if enabled():
            super().__init__(*args, **kwargs)


class SignInCallback(_OnlyWhenEnabled, OIDCAuthenticationCallbackView):
    get_settings = staticmethod(oidc_setting)  # type: ignore[assignment]


class SignOut(_OnlyWhenEnabled, OIDCLogoutView):
    """Sign out here, then at the provider (RP-initiated logout) when it offers that."""

    get_settings = staticmethod(oidc_setting)  # type: ignore[assignment]


def provider_logout_url(request: HttpRequest) -> str:
    """OIDC_OP_LOGOUT_URL_METHOD: the provider's end-session endpoint, with the ID token as
    the hint and the sign-in page to come back to."""
    end = discovery(settings.LEASEBOARD_OIDC_ISSUER).get("end_session_endpoint")
    back = request.build_absolute_uri(reverse("dashboard:login"))
    if not end:
        return back
    params = {"post_logout_redirect_uri": back, "client_id": settings.LEASEBOARD_OIDC_CLIENT_ID}
    id_token = request.session.get("oidc_id_token")
    if id_token:
        params["id_token_hint"] = id_token
    return f"{end}?{urlencode(params)}"


def sign_in_context(request: HttpRequest) -> dict[str, Any]:
    """Context processor for the sign-in page only (no query on any other page): whether
    to offer the provider's button, and the password form."""
    if request.path != settings.LOGIN_URL:
        return {}
    return {
        "sso_enabled": enabled(),
        "sso_provider": settings.LEASEBOARD_OIDC_PROVIDER_NAME,
        "local_passwords": sso.local_passwords_allowed(),
        "sso_failed": request.GET.get("sso") == "failed",
    }
