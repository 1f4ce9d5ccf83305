"""Security and sign-in: HTTPS and the proxy in front, passwords and single sign-on
(OpenID Connect), API rate limits, sign-in throttling and the Content Security Policy.
"""

from __future__ import annotations

from datetime import timedelta

from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from leaseboard.envconf import (
    env_bool,
    env_int,
    env_proxy_header,
    env_rate,
    env_str,
)

# --- Production switches (docs/production.env is a complete example) -------------------
# LEASEBOARD_HTTPS=true: the site is served over HTTPS only. Redirect plain HTTP, send HSTS,
# and keep session and CSRF cookies off plain HTTP.
LEASEBOARD_HTTPS = env_bool("LEASEBOARD_HTTPS", False)
SECURE_SSL_REDIRECT = LEASEBOARD_HTTPS
# Load balancers probe the backends over plain HTTP; a redirect would fail their checks.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("LEASEBOARD_HSTS_SECONDS", 31_536_000 if LEASEBOARD_HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("LEASEBOARD_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("LEASEBOARD_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = LEASEBOARD_HTTPS
CSRF_COOKIE_SECURE = LEASEBOARD_HTTPS
# Behind a TLS-terminating proxy: the header (and value) by which it says "this came over
# HTTPS", e.g. `X-Forwarded-Proto: https`. Set it only when the proxy always sets or strips
# that header, or a client could claim HTTPS.
SECURE_PROXY_SSL_HEADER = env_proxy_header("LEASEBOARD_PROXY_SSL_HEADER")
# How many reverse proxies append to X-Forwarded-For in front of Leaseboard. 0 (default):
# the header is ignored and the peer address is the client; N: the N-th address from the
# right is the client (what the outermost trusted proxy saw). Rate limits and sign-in
# throttling count per this address.
LEASEBOARD_TRUSTED_PROXIES = env_int("LEASEBOARD_TRUSTED_PROXIES", 0)

# Enforced by `manage.py create_user` (and Django's password forms): Django's standard four.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {
            "min_length": env_int("LEASEBOARD_PASSWORD_MIN_LENGTH", 12, minimum=8),
        },
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/login/"
# A new person, or one whose password an admin reset, chooses a password through a one-time
# link (Django's password-reset token: spent once used); nobody is shown another's password.
PASSWORD_RESET_TIMEOUT = 3600 * env_int("LEASEBOARD_SET_PASSWORD_LINK_HOURS", 24, minimum=1)
LOGIN_REDIRECT_URL = "/"
# The throttle first: a locked-out account or address is refused before its password is
# checked (django-axes). Non-web callers (shell, commands) pass no request and are not
# throttled.
# Single sign-on with OpenID Connect (leaseboard.policy.views.sso, mozilla-django-oidc): on when an
# issuer is set. The endpoints come from the issuer's discovery document; the group ->
# role mappings and whether local passwords still work, from config as code (`[sso]`).
LEASEBOARD_OIDC_ISSUER = env_str("LEASEBOARD_OIDC_ISSUER", "")


def sso_origins(issuer: str) -> list[str]:
    """The identity provider's origin, for CSP's form-action ([] without single sign-on)."""
    if not issuer:
        return []
    parts = issuer.split("/")
    return ["/".join(parts[:3])]


LEASEBOARD_OIDC_CLIENT_ID = env_str("LEASEBOARD_OIDC_CLIENT_ID", "")
LEASEBOARD_OIDC_CLIENT_SECRET = env_str("LEASEBOARD_OIDC_CLIENT_SECRET", "")
LEASEBOARD_OIDC_PROVIDER_NAME = env_str("LEASEBOARD_OIDC_PROVIDER_NAME", "your identity provider")
LEASEBOARD_OIDC_TIMEOUT_S = env_int("LEASEBOARD_OIDC_TIMEOUT_S", 10, minimum=1)
if LEASEBOARD_OIDC_ISSUER and not (LEASEBOARD_OIDC_CLIENT_ID and LEASEBOARD_OIDC_CLIENT_SECRET):
    raise ImproperlyConfigured("LEASEBOARD_OIDC_ISSUER needs _CLIENT_ID and _CLIENT_SECRET")
OIDC_RP_CLIENT_ID = LEASEBOARD_OIDC_CLIENT_ID
OIDC_RP_CLIENT_SECRET = LEASEBOARD_OIDC_CLIENT_SECRET
OIDC_RP_SCOPES = env_str("LEASEBOARD_OIDC_SCOPES", "openid email profile groups")
OIDC_RP_SIGN_ALGO = env_str("LEASEBOARD_OIDC_SIGN_ALGO", "RS256")
OIDC_USE_NONCE = True
OIDC_USE_PKCE = True
OIDC_PKCE_CODE_CHALLENGE_METHOD = "S256"
OIDC_STORE_ID_TOKEN = True  # the hint for the provider's logout
OIDC_OP_LOGOUT_URL_METHOD = "leaseboard.policy.views.sso.provider_logout_url"
OIDC_TIMEOUT = LEASEBOARD_OIDC_TIMEOUT_S
OIDC_CREATE_USER = True
LOGIN_REDIRECT_URL_FAILURE = "/login/?sso=failed"

AUTHENTICATION_BACKENDS = [
    "leaseboard.web.signin.SignInThrottleBackend",
    "leaseboard.policy.views.sso.LocalPasswordBackend",  # off with `[sso] local_passwords = false`
] + (["leaseboard.policy.views.sso.LeaseboardOIDCBackend"] if LEASEBOARD_OIDC_ISSUER else [])

# --- Limits (docs/design.md §9) ----------------------------------------------------------
# API rate limits, fixed windows counted in Redis when REDIS_URL is set (shared by every web
# process) and in process memory on the embedded default. One counter round trip a request.
# LEASEBOARD_RATE_LIMIT_ENABLED=false lifts them all (benchmarks, chaos runs).
LEASEBOARD_RATE_LIMIT_ENABLED = env_bool("LEASEBOARD_RATE_LIMIT_ENABLED", True)
# Requests per agent or recipient credential. An honest agent sends one renew per interval
# (a batch renewer one for all its leases; a single-lease agent every 5 s is 12/m).
LEASEBOARD_RATE_LIMIT_AGENT = env_rate("LEASEBOARD_RATE_LIMIT_AGENT", "600/m")
# Requests per recipient credential on the recipient-only paths (online fencing checks,
# refusal reports): a payments service may ask once for every payment it takes.
LEASEBOARD_RATE_LIMIT_RECIPIENT = env_rate("LEASEBOARD_RATE_LIMIT_RECIPIENT", "6000/m")
# Requests per client address that carry no valid credential (none, or a refused one): a
# bad-token flood meets 429 here. Agents with valid tokens behind one NAT address are
# counted per credential, never here, so a flood beside them does not throttle them.
LEASEBOARD_RATE_LIMIT_ADDRESS = env_rate("LEASEBOARD_RATE_LIMIT_ADDRESS", "60/m")

# Sign-in throttling (django-axes, counted by leaseboard.web.signin.SignInThrottleHandler):
# after LEASEBOARD_SIGNIN_FAILURE_LIMIT failed sign-ins, that person at that address is
# refused for the cool-off time, even with the right password; the address as a whole only
# after LEASEBOARD_SIGNIN_ADDRESS_FAILURE_LIMIT failures over every account (a guessing run
# across accounts), which must be well above a person's: one person's failures stop
# counting once they are locked out, so they never lock out the others behind one address
# (everyone behind a proxy when LEASEBOARD_TRUSTED_PROXIES is 0: docs/deployment.md).
AXES_ENABLED = env_bool("LEASEBOARD_SIGNIN_THROTTLE", True)
AXES_FAILURE_LIMIT = env_int("LEASEBOARD_SIGNIN_FAILURE_LIMIT", 5, minimum=1)
LEASEBOARD_SIGNIN_ADDRESS_FAILURE_LIMIT = env_int(
    "LEASEBOARD_SIGNIN_ADDRESS_FAILURE_LIMIT", 100, minimum=1
)
if LEASEBOARD_SIGNIN_ADDRESS_FAILURE_LIMIT <= AXES_FAILURE_LIMIT:
    raise ImproperlyConfigured(
        "LEASEBOARD_SIGNIN_ADDRESS_FAILURE_LIMIT must be above LEASEBOARD_SIGNIN_FAILURE_LIMIT "
        f"({LEASEBOARD_SIGNIN_ADDRESS_FAILURE_LIMIT} <= {AXES_FAILURE_LIMIT}): one person's "
        "failures would lock out everyone at their address"
    )
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LEASEBOARD_SIGNIN_COOLOFF_MINUTES", 15, minimum=1))
AXES_HANDLER = "leaseboard.web.signin.SignInThrottleHandler"
# In this order (SignInThrottleHandler reads them so): the person at one address, the address.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]
AXES_RESET_ON_SUCCESS = True
# The cool-off runs from the lock-out, not from the last refused try: the page's "wait N
# minutes" holds, and retrying does not extend one's own lock.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_CLIENT_IP_CALLABLE = "leaseboard.api.ratelimit.client_address"
AXES_LOCKOUT_CALLABLE = "leaseboard.web.signin.locked_out"
# Successful sign-ins are not logged by axes: the audit log is the one record of who did what.
AXES_DISABLE_ACCESS_LOG = True
AXES_VERBOSE = False

# Content Security Policy (django-csp 4): only this origin's scripts, styles and images; no
# inline script, no eval (htmx runs with allowEval off), no framing.
LEASEBOARD_CSP = env_bool("LEASEBOARD_CSP", True)
CONTENT_SECURITY_POLICY = (
    {
        "DIRECTIVES": {
            "default-src": [SELF],
            "script-src": [SELF],
            "style-src": [SELF],
            "img-src": [SELF, "data:"],
            "connect-src": [SELF],
            "font-src": [SELF],
            "object-src": [NONE],
            "base-uri": [NONE],
            # Signing out at the identity provider is a form's redirect to its origin.
            "form-action": [SELF, *sso_origins(LEASEBOARD_OIDC_ISSUER)],
            "frame-ancestors": [NONE],
        }
    }
    if LEASEBOARD_CSP
    else None
)
