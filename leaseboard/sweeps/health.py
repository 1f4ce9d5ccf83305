"""GET /healthz: the database and the broker the sweeps' workers consume from, each checked
here explicitly. 503 when either is unreachable, naming which."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from leaseboard.celery import app


def database_check() -> dict[str, object]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return {"ok": True, "vendor": connection.vendor}
    except Exception as exc:  # any failure means unhealthy; say which
        return {"ok": False, "detail": type(exc).__name__}


def broker_check() -> dict[str, object]:
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
            transport = conn.transport_cls if isinstance(conn.transport_cls, str) else ""
            return {"ok": True, "detail": transport}
    except Exception as exc:  # unreachable broker = unhealthy; say why
        return {"ok": False, "detail": type(exc).__name__}


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    checks = {"database": database_check(), "broker": broker_check()}
    healthy = all(check["ok"] for check in checks.values())
    return JsonResponse({"ok": healthy, "checks": checks}, status=200 if healthy else 503)
