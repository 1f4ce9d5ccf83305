"""What Leaseboard says about itself: log lines (the console and the access log) and
the link from a trace id to your trace viewer (OpenTelemetry itself is configured by the
standard OTEL_* variables: leaseboard/telemetry.py).
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from leaseboard.envconf import (
    env_str,
)

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
