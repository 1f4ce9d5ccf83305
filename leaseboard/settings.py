"""One env-driven settings module for every environment.

With no configuration Leaseboard runs embedded (SQLite in WAL mode, a file-system broker);
`DATABASE_URL`, `REDIS_URL` and `CELERY_BROKER_URL` switch it to PostgreSQL and Redis.
Bad values fail fast at start-up, naming the variable.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

from leaseboard.domain.timing import TimingPolicy, TimingPolicyError

BASE_DIR = Path(__file__).resolve().parent.parent
TESTING = "pytest" in sys.modules or os.environ.get("LEASEBOARD_TESTING") == "1"


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, got {raw!r}")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


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


def database_from_url(url: str) -> dict:
    """Parse `postgres://user:pass@host:port/name?opt=v` or `sqlite:///path` into DATABASES."""
    parsed = urlparse(url)
    if parsed.scheme in {"postgres", "postgresql", "pgsql"}:
        options = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parsed.path.lstrip("/")) or "leaseboard",
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(parsed.port or ""),
            "CONN_MAX_AGE": env_int("DB_CONN_MAX_AGE", 60),
            "CONN_HEALTH_CHECKS": True,
            "OPTIONS": options,
            "TEST": {"NAME": os.environ.get("TEST_DATABASE_NAME") or None},
        }
    if parsed.scheme == "sqlite":
        path = unquote(parsed.path)
        if path.startswith("//"):
            path = path[1:]
        elif path.startswith("/") and not url.startswith("sqlite:////"):
            path = path[1:] or str(DATA_DIR / "leaseboard.sqlite3")
        return sqlite_database(path or str(DATA_DIR / "leaseboard.sqlite3"))
    raise ImproperlyConfigured(
        f"DATABASE_URL must start with postgres:// or sqlite:///, got scheme {parsed.scheme!r}"
    )


def sqlite_database(path: str) -> dict:
    # WAL + IMMEDIATE transactions: writers take the lock at BEGIN, so two grants cannot
    # both read "no live lease" and then both write.
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": path,
        "OPTIONS": {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }


DATABASE_URL = os.environ.get("DATABASE_URL", "")
DATABASES = {
    "default": database_from_url(DATABASE_URL)
    if DATABASE_URL
    else sqlite_database(str(DATA_DIR / "leaseboard.sqlite3"))
}

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "leaseboard.core",
    "leaseboard.dashboard",
    "leaseboard.sandbox",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "leaseboard.api.middleware.ApiBodyLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

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
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# A request body above this is refused before any view runs (API: 413 validation_error).
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("LEASEBOARD_MAX_BODY_BYTES", 1024 * 1024, minimum=1024)
LEASEBOARD_MAX_CHECKPOINT_BYTES = env_int("LEASEBOARD_MAX_CHECKPOINT_BYTES", 256 * 1024, minimum=1)
LEASEBOARD_MAX_EFFECT_PAYLOAD_BYTES = env_int("LEASEBOARD_MAX_EFFECT_PAYLOAD_BYTES", 64 * 1024)
LEASEBOARD_MAX_BATCH_RENEW = env_int("LEASEBOARD_MAX_BATCH_RENEW", 1000, minimum=1)

# Default lease timing (DESIGN §4), overridable per queue and per work item. Validated now,
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

# Test-only seam (DESIGN §3): milliseconds added, in SQL, to the database clock.
LEASEBOARD_DB_CLOCK_OFFSET_MS = env_int("LEASEBOARD_DB_CLOCK_OFFSET_MS", 0, minimum=-(10**12))
if LEASEBOARD_DB_CLOCK_OFFSET_MS and not (TESTING or DEBUG):
    raise ImproperlyConfigured(
        "LEASEBOARD_DB_CLOCK_OFFSET_MS is a test seam; unset it in production"
    )

# Fencing-token signing keys (Ed25519). Embedded default: generated into DATA_DIR.
FENCING_KEY_DIR = Path(env_str("LEASEBOARD_FENCING_KEY_DIR", str(DATA_DIR / "fencing-keys")))
FENCING_TOKEN_TTL_MS = env_int("LEASEBOARD_FENCING_TOKEN_TTL_MS", 60_000, minimum=1000)

REDIS_URL = env_str("REDIS_URL", "")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "WARNING")},
}
