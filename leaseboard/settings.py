"""One env-driven settings module for every environment.

With no configuration Leaseboard runs embedded (SQLite in WAL mode, a file-system broker);
`DATABASE_URL`, `REDIS_URL` and `CELERY_BROKER_URL` switch it to PostgreSQL and Redis.
Bad values fail fast at start-up, naming the variable.
"""

from __future__ import annotations

import os
import secrets
import sys
from datetime import timedelta
from pathlib import Path

from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from leaseboard.domain.targets import networks_parsed
from leaseboard.domain.timing import TimingPolicy, TimingPolicyError, skew_allowance_checked
from leaseboard.envconf import (
    database_from_url,
    db_timeouts,
    env_bool,
    env_int,
    env_keys,
    env_proxy_header,
    env_rate,
    env_str,
    sqlite_database,
)

BASE_DIR = Path(__file__).resolve().parent.parent
TESTING = "pytest" in sys.modules or os.environ.get("LEASEBOARD_TESTING") == "1"


DATA_DIR = Path(env_str("LEASEBOARD_DATA_DIR", str(BASE_DIR / "var")))
DATA_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)


def _secret_key() -> str:
    key = os.environ.get("SECRET_KEY")
    if key:
        return key
    # Embedded default: one random key per data directory, kept so sessions survive restarts.
    path = DATA_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = [
    h for h in env_str("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",") if h
]
CSRF_TRUSTED_ORIGINS = [o for o in env_str("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

# --- Production switches (docs/production.env is a complete example) -------------------
# LEASEBOARD_HTTPS=true: the site is served over HTTPS only. Redirect plain HTTP, send HSTS,
# and keep session and CSRF cookies off plain HTTP.
LEASEBOARD_HTTPS = env_bool("LEASEBOARD_HTTPS", False)
# A person whose roles are all held for named queues sees only those queues' work on the
# live page (off: everyone sees every queue, and may act only in their own).
LEASEBOARD_HIDE_OTHER_QUEUES = env_bool("LEASEBOARD_HIDE_OTHER_QUEUES", False)
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


# --- When the database fails (docs/design.md §14, docs/deployment.md "When parts fail") ---------
# Connect timeout, and the statement and lock timeouts every web connection has by default
# (the hot paths'; enforced by the server): leaseboard.envconf.db_timeouts.
(
    LEASEBOARD_DB_CONNECT_TIMEOUT_S,
    LEASEBOARD_DB_STATEMENT_TIMEOUT_MS,
    LEASEBOARD_DB_LOCK_TIMEOUT_MS,
) = db_timeouts()
# Sweeps, retention and config apply: their transactions' own, longer bounds (SET LOCAL).
LEASEBOARD_DB_LONG_STATEMENT_TIMEOUT_MS = env_int(
    "LEASEBOARD_DB_LONG_STATEMENT_TIMEOUT_MS", 60_000, minimum=1
)
LEASEBOARD_DB_LONG_LOCK_TIMEOUT_MS = env_int(
    "LEASEBOARD_DB_LONG_LOCK_TIMEOUT_MS", 10_000, minimum=1
)
# The whole request's bound on the database, enforced from this side (a frozen server
# enforces no timeout of its own): under /api/ (and /healthz), below the agent SDK's 2 s
# request timeout so an agent hears 503 rather than timing out; and for pages. 0: none.
LEASEBOARD_API_DEADLINE_MS = env_int("LEASEBOARD_API_DEADLINE_MS", 1800)
LEASEBOARD_PAGE_DEADLINE_MS = env_int("LEASEBOARD_PAGE_DEADLINE_MS", 10_000)
# Retry-After of a 503 `unavailable`; after a connection-level failure a process also
# answers 503 at once for this long (then lets one request try) rather than making every
# request wait out the connect timeout.
LEASEBOARD_DB_RETRY_AFTER_S = float(env_str("LEASEBOARD_DB_RETRY_AFTER_S", "1"))
if not 0.1 <= LEASEBOARD_DB_RETRY_AFTER_S <= 60:
    raise ImproperlyConfigured("LEASEBOARD_DB_RETRY_AFTER_S must be between 0.1 and 60")

DATABASE_URL = os.environ.get("DATABASE_URL", "")
DATABASES = {
    "default": database_from_url(DATABASE_URL, DATA_DIR)
    if DATABASE_URL
    else sqlite_database(str(DATA_DIR / "leaseboard.sqlite3"))
}

# Dashboard pages and exports may read from a streaming replica (leaseboard.core.replicas;
# docs/deployment.md, "High availability"): DATABASE_REPLICA_URL, e.g. HAProxy's port for
# Patroni's replicas. Past LEASEBOARD_REPLICA_MAX_LAG_S of lag they read from the primary;
# writes and every authority decision always do.
DATABASE_REPLICA_URL = os.environ.get("DATABASE_REPLICA_URL", "")
if DATABASE_REPLICA_URL:
    DATABASES["replica"] = {
        **database_from_url(DATABASE_REPLICA_URL, DATA_DIR),
        # Tests read the primary's test database through this alias.
        "TEST": {"MIRROR": "default"},
    }
DATABASE_ROUTERS = ["leaseboard.core.replicas.ReplicaRouter"]
LEASEBOARD_REPLICA_MAX_LAG_S = float(env_str("LEASEBOARD_REPLICA_MAX_LAG_S", "5"))
if not 0 <= LEASEBOARD_REPLICA_MAX_LAG_S <= 3600:
    raise ImproperlyConfigured("LEASEBOARD_REPLICA_MAX_LAG_S must be between 0 and 3600")

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "ninja",  # its templates and static files: Swagger UI served from here, not a CDN
    "axes",
    "csp",
    "leaseboard.core",
    "leaseboard.web",
    "leaseboard.dashboard",
    "leaseboard.sweeps",
    "leaseboard.takeovers",
    "leaseboard.policy",
    # Installed everywhere (its tables and demo commands); its URLs only with LEASEBOARD_DEMO.
    "leaseboard.sandbox",
]

MIDDLEWARE = [
    # First: marks a bearer-token API request for the agents' lane (leaseboard/api/lane.py),
    # which every `leaseboard.api.lane.*` entry below (a browser-only middleware, wrapped)
    # passes straight on.
    "leaseboard.api.lane.ApiLaneMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "leaseboard.api.lane.CSPMiddleware",
    "leaseboard.api.lane.WhiteNoiseMiddleware",
    # Every request's deadline on the database; 503 at once while it is unreachable.
    "leaseboard.api.middleware.DatabaseGuardMiddleware",
    "leaseboard.api.middleware.ApiBodyLimitMiddleware",
    "leaseboard.api.middleware.ApiRateLimitMiddleware",
    "leaseboard.api.lane.SessionMiddleware",
    "leaseboard.api.lane.CommonMiddleware",
    "leaseboard.api.lane.CsrfViewMiddleware",
    "leaseboard.api.lane.AuthenticationMiddleware",
    "leaseboard.api.lane.MessageMiddleware",
    "leaseboard.api.lane.XFrameOptionsMiddleware",
    "leaseboard.api.lane.HtmxMiddleware",
    # DEBUG only (the demo): the product's 404, not Django's technical page of every URL.
    "leaseboard.api.lane.DebugNotFoundMiddleware",
    # Last, as django-axes asks: it turns a sign-in flagged as locked out into the page.
    # Not wrapped: its system check looks for this path, and on the lane it reads one
    # attribute of the request.
    "axes.middleware.AxesMiddleware",
]

# false: bearer-token API requests take the full middleware stack too (a comparison only).
LEASEBOARD_API_LANE = env_bool("LEASEBOARD_API_LANE", True)

ROOT_URLCONF = "leaseboard.urls"
WSGI_APPLICATION = "leaseboard.wsgi.application"
ASGI_APPLICATION = "leaseboard.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "leaseboard.web.roles.can_context",
                "leaseboard.policy.views.sso.sign_in_context",
            ],
        },
    },
]

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

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Serve from the app/static folders directly: no collectstatic step for a small app.
WHITENOISE_USE_FINDERS = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# lease_due_idx INCLUDEs two columns on PostgreSQL (index-only counts); SQLite, the
# embedded default, has no covering indexes and builds it without them, as intended.
# security.W002/W003 look for Django's CSRF and X-Frame-Options middleware by dotted path;
# ours run wrapped for the API lane, and leaseboard/web/checks.py checks them through it.
SILENCED_SYSTEM_CHECKS = ["models.W040", "security.W002", "security.W003"]

# A request body above this is refused before any view runs (API: 413 validation_error).
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("LEASEBOARD_MAX_BODY_BYTES", 1024 * 1024, minimum=1024)
LEASEBOARD_MAX_CHECKPOINT_BYTES = env_int("LEASEBOARD_MAX_CHECKPOINT_BYTES", 256 * 1024, minimum=1)
LEASEBOARD_MAX_EFFECT_PAYLOAD_BYTES = env_int("LEASEBOARD_MAX_EFFECT_PAYLOAD_BYTES", 64 * 1024)
# What a rule's condition may read (issue 33): a payload or scope with a list or map longer
# than this, or nested deeper, is not evaluated; the rule fails closed. CEL's own runtime
# also stops any one evaluation after 10,000 iterations in all (fixed in cel-expr-python).
LEASEBOARD_RULE_MAX_ITEMS = env_int("LEASEBOARD_RULE_MAX_ITEMS", 10_000, minimum=1)
LEASEBOARD_RULE_MAX_DEPTH = env_int("LEASEBOARD_RULE_MAX_DEPTH", 32, minimum=1)
LEASEBOARD_MAX_BATCH_RENEW = env_int("LEASEBOARD_MAX_BATCH_RENEW", 1000, minimum=1)
# Seconds a process remembers a bearer token it has verified (0: always ask the database).
LEASEBOARD_TOKEN_CACHE_SECONDS = float(env_str("LEASEBOARD_TOKEN_CACHE_SECONDS", "2"))

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

# The demo (`dev.py demo` sets it): mounts the payments sandbox at /sandbox/. Never in
# production: the sandbox takes anonymous payments and shows its ledger to anyone.
LEASEBOARD_DEMO = env_bool("LEASEBOARD_DEMO", False)

# OpenTelemetry is configured by the standard OTEL_* variables (leaseboard/telemetry.py,
# docs/mcp.md), off when none is set. A trace id shown on a page links to your trace
# viewer when this names it, e.g. "https://jaeger.example/trace/{trace_id}".
LEASEBOARD_TRACE_URL = env_str("LEASEBOARD_TRACE_URL", "")
if LEASEBOARD_TRACE_URL and (
    "{trace_id}" not in LEASEBOARD_TRACE_URL
    or not LEASEBOARD_TRACE_URL.startswith(("http://", "https://"))
):
    raise ImproperlyConfigured(
        "LEASEBOARD_TRACE_URL: an http(s) URL with {trace_id} where the trace id goes"
    )

# Default lease timing (docs/design.md §4), overridable per queue and per work item. Validated now,
# so a bad deployment refuses to start instead of handing out unsafe leases.
LEASE_DEFAULTS = TimingPolicy(
    ttl_ms=env_int("LEASE_TTL_MS", 15_000, minimum=1),
    renew_after_ms=env_int("LEASE_RENEW_AFTER_MS", 0) or None,
    jeopardy_after_ms=env_int("LEASE_JEOPARDY_AFTER_MS", 0) or None,
    lock_delay_ms=env_int("LEASE_LOCK_DELAY_MS", 0),
    max_lifetime_ms=env_int("LEASE_MAX_LIFETIME_MS", 24 * 3600 * 1000, minimum=1),
)
try:
    LEASE_DEFAULTS = LEASE_DEFAULTS.resolved()
except TimingPolicyError as exc:
    raise ImproperlyConfigured(f"lease timing: {exc}") from None

# Test-only seam (docs/design.md §3): milliseconds added, in SQL, to the database clock.
LEASEBOARD_DB_CLOCK_OFFSET_MS = env_int("LEASEBOARD_DB_CLOCK_OFFSET_MS", 0, minimum=-(10**12))
if LEASEBOARD_DB_CLOCK_OFFSET_MS and not (TESTING or DEBUG):
    raise ImproperlyConfigured(
        "LEASEBOARD_DB_CLOCK_OFFSET_MS is a test seam; unset it in production"
    )

# An effect's fencing token dies with the standing it proves: at the lease's expiry at the
# moment of issue, and never more than this after issue (the signing keys' settings follow
# the audit key's).
FENCING_TOKEN_TTL_MS = env_int("LEASEBOARD_FENCING_TOKEN_TTL_MS", 60_000, minimum=1000)
# Clock-skew allowance between the database clock and recipients' clocks: a successor acts
# only once every open token of its predecessor has expired plus this (docs/design.md §5).
try:
    LEASEBOARD_FENCING_SKEW_MS = skew_allowance_checked(
        env_int("LEASEBOARD_FENCING_SKEW_MS", 1000), ttl_ms=LEASE_DEFAULTS.ttl_ms
    )
except TimingPolicyError as exc:
    raise ImproperlyConfigured(str(exc)) from None

# --- Audit log integrity (docs/audit.md) ----------------------------------------------
# Entries are chained with an HMAC whose key lives outside the database: the current key
# from LEASEBOARD_AUDIT_KEY, or the first line of the file LEASEBOARD_AUDIT_KEY_FILE (later
# lines: retired keys, kept to verify older entries). Required with DEBUG off on
# PostgreSQL; in DEBUG, tests and the embedded SQLite mode (where the database is a file
# beside DATA_DIR anyway) a key is generated into DATA_DIR. Keys are 32+ characters.
AUDIT_KEY_MIN_CHARS = 32


# Where a secret key may be generated into DATA_DIR rather than required.
KEYS_MAY_BE_GENERATED = DEBUG or TESTING or DATABASES["default"]["ENGINE"].endswith("sqlite3")


def _audit_keys() -> tuple[str, tuple[str, ...]]:
    return env_keys(
        "LEASEBOARD_AUDIT_KEY",
        retired_name="LEASEBOARD_AUDIT_RETIRED_KEYS",
        generated=DATA_DIR / "audit-key" if KEYS_MAY_BE_GENERATED else None,
        what="an audit key",
        min_chars=AUDIT_KEY_MIN_CHARS,
        missing=(
            "LEASEBOARD_AUDIT_KEY (or LEASEBOARD_AUDIT_KEY_FILE) is required with DEBUG off "
            "on PostgreSQL: the audit log's MAC key must live outside the database "
            "(generate one with: python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        ),
    )


LEASEBOARD_AUDIT_KEY, LEASEBOARD_AUDIT_RETIRED_KEYS = _audit_keys()
# Signed checkpoints {seq, head, count, at} are appended here, outside the database.
LEASEBOARD_AUDIT_CHECKPOINT_DIR = Path(
    env_str("LEASEBOARD_AUDIT_CHECKPOINT_DIR", str(DATA_DIR / "audit-checkpoints"))
)
# How often beat runs `audit_checkpoint` (0: not from beat; run it from cron where the
# checkpoint directory lives instead).
LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S = env_int("LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S", 300)
if 0 < LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S < 10:
    raise ImproperlyConfigured("LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S must be 0 or at least 10")
# How old an entry may be and still be covered by no checkpoint before `verify_audit` says
# checkpoints are missing (0: two intervals and a minute, or 26 h when cron writes them).
LEASEBOARD_AUDIT_CHECKPOINT_GRACE_S = env_int("LEASEBOARD_AUDIT_CHECKPOINT_GRACE_S", 0)
if TESTING and DATABASES["default"]["ENGINE"].endswith("postgresql"):
    # Django's test flush TRUNCATEs every table; the audit table's TRUNCATE trigger lets a
    # session through only with this setting (docs/audit.md). Never set in production.
    _opts = DATABASES["default"]["OPTIONS"]
    _opts["options"] = (
        str(_opts.get("options", "")) + " -c leaseboard.audit_truncate=allow"
    ).strip()

# --- Fencing-token signing keys (docs/deployment.md, "Fencing keys") -------------------
# Ed25519 keys live in the database (one key set for every web process), their private
# halves sealed with AES-256-GCM under a key-encryption key (KEK) that is not in it: from
# LEASEBOARD_FENCING_KEK, or the first line of LEASEBOARD_FENCING_KEK_FILE (later lines:
# retired KEKs, kept to open keys sealed before a KEK rotation). Required with DEBUG off on
# PostgreSQL; in DEBUG, tests and the embedded SQLite mode one is generated into DATA_DIR.
FENCING_KEK_MIN_CHARS = 32


def _fencing_keks() -> tuple[str, tuple[str, ...]]:
    if os.environ.get("LEASEBOARD_FENCING_KEY_DIR"):
        # An earlier release named this setting but never read it: refuse rather than let
        # an operator believe the private keys are kept in that directory.
        raise ImproperlyConfigured(
            "LEASEBOARD_FENCING_KEY_DIR is not used: fencing private keys are kept in the "
            "database, sealed with LEASEBOARD_FENCING_KEK; unset it and set that instead"
        )
    return env_keys(
        "LEASEBOARD_FENCING_KEK",
        retired_name="LEASEBOARD_FENCING_RETIRED_KEKS",
        generated=DATA_DIR / "fencing-kek" if KEYS_MAY_BE_GENERATED else None,
        what="a key-encryption key",
        min_chars=FENCING_KEK_MIN_CHARS,
        missing=(
            "LEASEBOARD_FENCING_KEK (or LEASEBOARD_FENCING_KEK_FILE) is required with DEBUG "
            "off on PostgreSQL: fencing private keys are sealed with it, so it must live "
            "outside the database (generate one with: "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        ),
    )


LEASEBOARD_FENCING_KEK, LEASEBOARD_FENCING_RETIRED_KEKS = _fencing_keks()
# A rotated key is published at once but signs only after this delay, so recipients fetch
# it before they meet a token signed by it. Default: twice the recipient verifier's
# shortest JWKS refresh interval (30 s, leaseboard_recipient/verifier.py).
LEASEBOARD_FENCING_KEY_PUBLISH_DELAY_MS = env_int(
    "LEASEBOARD_FENCING_KEY_PUBLISH_DELAY_MS", 60_000, minimum=0
)

REDIS_URL = env_str("REDIS_URL", "")

# One console line per event: a refused request (4xx) without its traceback, and Django's
# loggers printed once (not again through the root logger). LEASEBOARD_ACCESS_LOG: the
# development server's request lines, and the refused requests' lines, go to that file,
# not the console (`dev.py demo` sets it); the console keeps what needs a person.
LOG_LEVEL = env_str("LOG_LEVEL", "WARNING")
LEASEBOARD_ACCESS_LOG = env_str("LEASEBOARD_ACCESS_LOG", "")
_one_line = {"()": "leaseboard.web.logs.ClientErrorsOneLine"}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "one_line": _one_line,
        "client_errors_only": {"()": "leaseboard.web.logs.ClientErrorsOnly"},
        "no_client_errors": {"()": "leaseboard.web.logs.NoClientErrors"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "filters": ["one_line"]},
        "access": (
            {"class": "logging.FileHandler", "filename": LEASEBOARD_ACCESS_LOG, "delay": True}
            if LEASEBOARD_ACCESS_LOG
            else {"class": "logging.StreamHandler"}
        ),
        "requests_console": {
            "class": "logging.StreamHandler",
            "filters": ["one_line"] + (["no_client_errors"] if LEASEBOARD_ACCESS_LOG else []),
        },
        "requests_access": {
            "class": "logging.NullHandler",
        }
        if not LEASEBOARD_ACCESS_LOG
        else {
            "class": "logging.FileHandler",
            "filename": LEASEBOARD_ACCESS_LOG,
            "delay": True,
            "filters": ["one_line", "client_errors_only"],
        },
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django": {"handlers": ["console"], "level": LOG_LEVEL, "propagate": False},
        "django.request": {
            "handlers": ["requests_console", "requests_access"],
            "level": LOG_LEVEL,
            "propagate": False,
        },
        "django.server": {"handlers": ["access"], "level": "INFO", "propagate": False},
    },
}


# --- Celery (sweeps, notifications, retention; leaseboard/sweeps) ---------------------
# Production: Redis from CELERY_BROKER_URL or REDIS_URL. Embedded default: kombu's
# filesystem transport under DATA_DIR, so `celery -A leaseboard worker -B` needs no server.
import json  # noqa: E402

from celery.schedules import crontab  # noqa: E402

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "") or REDIS_URL or "filesystem://"
# Longest a task may run before the worker kills it. The broker's visibility timeout must
# exceed every task's limit, or Redis redelivers a task that is still running.
CELERY_TASK_TIME_LIMIT = env_int("LEASEBOARD_TASK_TIME_LIMIT_S", 300, minimum=1)
CELERY_TASK_SOFT_TIME_LIMIT = max(1, CELERY_TASK_TIME_LIMIT - 10)
LEASEBOARD_BROKER_VISIBILITY_TIMEOUT_S = env_int(
    "LEASEBOARD_BROKER_VISIBILITY_TIMEOUT_S", 3600, minimum=1
)
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = DATA_DIR / "broker"
    for _sub in ("queue", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": LEASEBOARD_BROKER_VISIBILITY_TIMEOUT_S,
        # kombu's default is none: a black-holed broker host would hang a connect forever.
        "socket_connect_timeout": 5,
    }
# Our consumer: Celery's, made to survive losing Redis while it holds unacknowledged
# messages (celery 5.7.0 exits there; leaseboard/sweeps/consumer.py says why).
CELERY_WORKER_CONSUMER = "leaseboard.sweeps.consumer:Consumer"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker waits out a broker outage however long (reconnecting every 2 s at most:
# leaseboard/sweeps/consumer.py) rather than exit after Celery's 100 tries.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# One deployment (or test run) per queue name when several share a Redis.
CELERY_TASK_DEFAULT_QUEUE = env_str("LEASEBOARD_CELERY_QUEUE", "celery")
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
# Ack early by default: a sweep lost with its worker is redone by the next tick. Tasks that
# must not be lost (notification deliveries) set acks_late themselves. Never reject on
# worker loss: a task that kills its worker would be redelivered forever.
CELERY_TASK_ACKS_LATE = False
CELERY_TASK_REJECT_ON_WORKER_LOST = False
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

LEASEBOARD_SWEEP_INTERVAL_S = float(env_str("LEASEBOARD_SWEEP_INTERVAL_S", "1"))
if not 0.05 <= LEASEBOARD_SWEEP_INTERVAL_S <= 60:
    raise ImproperlyConfigured("LEASEBOARD_SWEEP_INTERVAL_S must be between 0.05 and 60")
LEASEBOARD_SWEEP_BATCH = env_int("LEASEBOARD_SWEEP_BATCH", 500, minimum=1)
# A sweep that last completed longer ago than this is stale (/healthz, /metrics, and a
# banner on every dashboard page): leases are not being ended or alerted.
LEASEBOARD_SWEEPS_STALE_AFTER_S = float(
    env_str("LEASEBOARD_SWEEPS_STALE_AFTER_S", "")
    or str(max(5.0, 10 * LEASEBOARD_SWEEP_INTERVAL_S))
)
# A sweep stops after this many batches; the next tick continues (bounded task time).
LEASEBOARD_SWEEP_MAX_BATCHES = env_int("LEASEBOARD_SWEEP_MAX_BATCHES", 200, minimum=1)
# A gap between sweeps longer than this is recorded as an outage window; leases that fell
# due inside a window longer than their own ttl get a recovery grace instead of expiring.
LEASEBOARD_OUTAGE_MIN_MS = env_int(
    "LEASEBOARD_OUTAGE_MIN_MS", max(3000, int(LEASEBOARD_SWEEP_INTERVAL_S * 3000)), minimum=1
)
LEASEBOARD_EVENT_RETENTION_DAYS = env_int("LEASEBOARD_EVENT_RETENTION_DAYS", 90, minimum=1)
# The HMAC key for webhooks that name no secret of their own. Never SECRET_KEY: a receiver
# holding it could forge sessions. Required when a webhook without its own secret is
# configured here; a queue's such webhook fails its delivery, naming this variable.
LEASEBOARD_WEBHOOK_SECRET = env_str("LEASEBOARD_WEBHOOK_SECRET", "")
if LEASEBOARD_WEBHOOK_SECRET and len(LEASEBOARD_WEBHOOK_SECRET) < 16:
    raise ImproperlyConfigured("LEASEBOARD_WEBHOOK_SECRET must be at least 16 characters")
LEASEBOARD_WEBHOOK_TIMEOUT_S = float(env_str("LEASEBOARD_WEBHOOK_TIMEOUT_S", "5"))
LEASEBOARD_WEBHOOK_MAX_RETRIES = env_int("LEASEBOARD_WEBHOOK_MAX_RETRIES", 8)
# Outbound policy (issue 33): webhooks reach only public addresses, checked when a URL is
# saved and again after DNS resolution when it is sent, unless their network is listed
# here (comma-separated CIDRs). The demo and the tests list loopback; production lists
# nothing by default, so a webhook cannot reach Redis, PostgreSQL or the app itself.
try:
    LEASEBOARD_WEBHOOK_ALLOW_NETWORKS = networks_parsed(
        env_str(
            "LEASEBOARD_WEBHOOK_ALLOW_NETWORKS",
            "127.0.0.0/8,::1/128" if TESTING or LEASEBOARD_DEMO else "",
        )
    )
except ValueError as exc:
    raise ImproperlyConfigured(f"LEASEBOARD_WEBHOOK_ALLOW_NETWORKS: {exc}") from None
# Epoch-advance notices: a web process enqueues at most one delivery run this often (a
# burst of grants costs one broker message); the sweep starts one whenever notices are due.
LEASEBOARD_EPOCH_NOTICE_FLUSH_S = float(env_str("LEASEBOARD_EPOCH_NOTICE_FLUSH_S", "0.2"))
if not 0 <= LEASEBOARD_EPOCH_NOTICE_FLUSH_S <= 60:
    raise ImproperlyConfigured("LEASEBOARD_EPOCH_NOTICE_FLUSH_S must be between 0 and 60")
# After a wake-up (an outbox drain asked for after a commit) could not be published, a
# process stops trying for this long; the sweep drains the outboxes meanwhile.
LEASEBOARD_WAKEUP_RETRY_AFTER_S = float(env_str("LEASEBOARD_WAKEUP_RETRY_AFTER_S", "5"))
# Notification targets for alerts that belong to no queue (outage recovery), same shape
# as Queue.notify: {"webhooks": [{"url": ..., "secret": ...}], "emails": [...]}.
try:
    LEASEBOARD_NOTIFY_DEFAULT = json.loads(env_str("LEASEBOARD_NOTIFY_DEFAULT", "{}") or "{}")
except ValueError:
    raise ImproperlyConfigured("LEASEBOARD_NOTIFY_DEFAULT must be a JSON object") from None
if not isinstance(LEASEBOARD_NOTIFY_DEFAULT, dict):
    raise ImproperlyConfigured("LEASEBOARD_NOTIFY_DEFAULT must be a JSON object")
if not LEASEBOARD_WEBHOOK_SECRET and any(
    isinstance(hook, dict) and not hook.get("secret")
    for hook in LEASEBOARD_NOTIFY_DEFAULT.get("webhooks") or []
):
    raise ImproperlyConfigured(
        "LEASEBOARD_NOTIFY_DEFAULT has a webhook without a secret: "
        "set LEASEBOARD_WEBHOOK_SECRET (or the hook's own secret)"
    )
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "leaseboard@localhost")

CELERY_BEAT_SCHEDULE = {
    "lease-sweep": {
        "task": "leaseboard.sweeps.tasks.sweep",
        "schedule": LEASEBOARD_SWEEP_INTERVAL_S,
        # A sweep tick that waited longer than this is stale; a fresh one is coming.
        "options": {"expires": max(5.0, LEASEBOARD_SWEEP_INTERVAL_S * 5)},
    },
    "lease-event-retention": {
        "task": "leaseboard.sweeps.tasks.retention",
        "schedule": crontab(hour=3, minute=17),
    },
}
if LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S:
    CELERY_BEAT_SCHEDULE["audit-checkpoint"] = {
        "task": "leaseboard.core.tasks.audit_checkpoint",
        "schedule": float(LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S),
        "options": {"expires": float(LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S)},
    }
# --- end Celery ------------------------------------------------------------------------

# --- Effect approvals (docs/approvals.md) -----------------------------------------------
# How long an approver has to decide a require_approval effect when its rule does not say
# (then the rule's on_timeout decision applies: reject unless the rule says approve), and
# how long before that deadline approvers are reminded.
LEASEBOARD_APPROVAL_DECIDE_WITHIN_MS = env_int(
    "LEASEBOARD_APPROVAL_DECIDE_WITHIN_MS", 15 * 60_000, minimum=1_000
)
LEASEBOARD_APPROVAL_REMIND_BEFORE_MS = env_int(
    "LEASEBOARD_APPROVAL_REMIND_BEFORE_MS", 5 * 60_000, minimum=0
)
# The address decision-page links in approvers' e-mails and chat messages start with.
LEASEBOARD_PUBLIC_URL = os.environ.get("LEASEBOARD_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")

# --- Takeovers (leaseboard/takeovers) ---------------------------------------------------
# Human standing granted by an approved takeover: default, minimum and maximum length, and
# how long a takeover request waits for a decision before it expires.
LEASEBOARD_TAKEOVER_DEFAULT_STANDING_MS = env_int(
    "LEASEBOARD_TAKEOVER_DEFAULT_STANDING_MS", 30 * 60_000, minimum=60_000
)
LEASEBOARD_TAKEOVER_MIN_STANDING_MS = env_int(
    "LEASEBOARD_TAKEOVER_MIN_STANDING_MS", 60_000, minimum=1_000
)
LEASEBOARD_TAKEOVER_MAX_STANDING_MS = env_int(
    "LEASEBOARD_TAKEOVER_MAX_STANDING_MS", 4 * 3600_000, minimum=60_000
)
LEASEBOARD_TAKEOVER_DECISION_TTL_MS = env_int(
    "LEASEBOARD_TAKEOVER_DECISION_TTL_MS", 15 * 60_000, minimum=10_000
)
if not (
    LEASEBOARD_TAKEOVER_MIN_STANDING_MS
    <= LEASEBOARD_TAKEOVER_DEFAULT_STANDING_MS
    <= LEASEBOARD_TAKEOVER_MAX_STANDING_MS
):
    raise ImproperlyConfigured(
        "LEASEBOARD_TAKEOVER_DEFAULT_STANDING_MS must lie between the MIN and MAX standing"
    )

# --- Policy and configuration (leaseboard/policy, docs/policy.md) -----------------------
# Four-eyes: a change to a queue's commit-time rules waits for a second admin's approval.
LEASEBOARD_POLICY_FOUR_EYES = env_bool("LEASEBOARD_POLICY_FOUR_EYES", False)

# --- Dashboard (leaseboard/dashboard) ---------------------------------------------------
# Recurrences of one agent's alerts of one kind within this long of the open incident's
# last sighting fold into it (count, first and last seen) instead of opening new alerts;
# 0 turns folding off (core.services.alerts.alerts_fold).
LEASEBOARD_ALERT_FOLD_WINDOW_MS = env_int("LEASEBOARD_ALERT_FOLD_WINDOW_MS", 600_000, minimum=0)
# How long an ended lease stays on the live page (greyed, with its end reason, in the
# section below the live ones) so the row someone is about to click does not vanish.
LEASEBOARD_DASHBOARD_ENDED_VISIBLE_MS = env_int(
    "LEASEBOARD_DASHBOARD_ENDED_VISIBLE_MS", 120_000, minimum=0
)
