"""Settings of the bare project: the database from DATABASE_URL (the bench's database,
persistent connections as the API run has them), two middleware, nothing else."""

from __future__ import annotations

import os
from urllib.parse import urlparse

_db = urlparse(os.environ["DATABASE_URL"])

SECRET_KEY = "bench-bare-project-not-a-secret"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS: list[str] = []
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
]
ROOT_URLCONF = "bench.bare.urls"
WSGI_APPLICATION = "bench.bare.wsgi.application"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _db.path.lstrip("/"),
        "USER": _db.username or "",
        "PASSWORD": _db.password or "",
        "HOST": _db.hostname or "",
        "PORT": str(_db.port or ""),
        "CONN_MAX_AGE": int(os.environ.get("DB_CONN_MAX_AGE", "600")),
        # Django's default (no SELECT 1 before each request's first query); see
        # docs/benchmarks.md for what the project's CONN_HEALTH_CHECKS=True costs.
        "CONN_HEALTH_CHECKS": False,
    }
}
USE_TZ = True
USE_I18N = False
