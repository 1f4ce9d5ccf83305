"""GET /healthz, and how long expiry sweeps have been stopped (docs/design.md §14).

The HTTP status says whether this web node can serve: 503 only when it cannot reach its
database (take it out of the pool). The broker and the sweeps are shared by every web
node, and the API keeps deciding without them (Redis is an accelerator, never the
record): a broker outage or a stale sweep is reported in the body, `ok: false` with the
check that failed, under 200, so a load balancer does not take every node out because
Redis or the workers died. Monitoring alerts on the body (docs/deployment.md).

`sweeps`: the age of the last *completed* sweep (`SweepState.last_completed_at_ms`) and
`stale` once it is older than LEASEBOARD_SWEEPS_STALE_AFTER_S, or when none ever
completed: leases are then not being ended or alerted. The same figure feeds /metrics
and the dashboard's banner (leaseboard.domain.sweeps).
"""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from leaseboard.celery import app
from leaseboard.core.clock import DbNowMs
from leaseboard.domain.sweeps import SweepAge, sweep_age_from
from leaseboard.sweeps.models import SweepState


def sweep_age_now(last_completed_at_ms: int | None, now_ms: int) -> SweepAge:
    return sweep_age_from(last_completed_at_ms, now_ms, settings.LEASEBOARD_SWEEPS_STALE_AFTER_S)


def sweep_age() -> SweepAge:
    """One query: the last completed sweep and the database clock."""
    row = (
        SweepState.objects.filter(id=1)
        .annotate(now=DbNowMs())
        .values_list("last_completed_at_ms", "now")
        .first()
    )
    if row is None:  # no sweep ever started
        return sweep_age_now(None, 0)
    return sweep_age_now(row[0], row[1])


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


def sweeps_check() -> dict[str, object]:
    try:
        age = sweep_age()
    except Exception as exc:  # the database check says why
        return {"ok": False, "detail": type(exc).__name__}
    return {
        "ok": not age.stale,
        "stale": age.stale,
        "last_completed_at_ms": age.last_completed_at_ms,
        "age_s": None if age.age_s is None else round(age.age_s, 1),
        "stale_after_s": settings.LEASEBOARD_SWEEPS_STALE_AFTER_S,
    }


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    checks = {"database": database_check()}
    checks["broker"] = broker_check()
    checks["sweeps"] = sweeps_check() if checks["database"]["ok"] else {"ok": False}
    serving = bool(checks["database"]["ok"])
    return JsonResponse(
        {"ok": all(c["ok"] for c in checks.values()), "serving": serving, "checks": checks},
        status=200 if serving else 503,
    )
