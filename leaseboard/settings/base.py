"""Django's own settings and where Leaseboard keeps its files: the data directory, the
secret key, the apps, the middleware (the agents' API lane first), templates, static
files, e-mail; and whether the demo is on.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from leaseboard.envconf import (
    env_bool,
    env_str,
)

# The repository's root (this file is leaseboard/settings/base.py).
BASE_DIR = Path(__file__).resolve().parents[2]
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

# The demo (`dev.py demo` sets it): mounts the payments sandbox at /sandbox/. Never in
# production: the sandbox takes anonymous payments and shows its ledger to anyone.
LEASEBOARD_DEMO = env_bool("LEASEBOARD_DEMO", False)

EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "leaseboard@localhost")
