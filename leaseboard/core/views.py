"""Operational endpoints that belong to no one screen."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

BROKER_CHECKS: list = []  # callables returning (name, ok, detail); the Celery app adds one


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    checks: dict[str, dict] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = {"ok": True, "vendor": connection.vendor}
    except Exception as exc:  # any failure means unhealthy; say which
        checks["database"] = {"ok": False, "detail": type(exc).__name__}
    for check in BROKER_CHECKS:
        name, ok, detail = check()
        checks[name] = {"ok": ok, "detail": detail}
    healthy = all(c["ok"] for c in checks.values())
    return JsonResponse({"ok": healthy, "checks": checks}, status=200 if healthy else 503)
