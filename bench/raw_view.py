"""A minimal Django view running the very same fenced renew UPDATE as the API's fast path,
with no auth, no schema and no service layer: the framework's own ceiling for one lease
per request. Served by the same gunicorn as the API (bench/settings_bench.py)."""

from __future__ import annotations

import json

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from leaseboard.core.sql import POSTGRESQL, lease_renew

SQL = lease_renew(POSTGRESQL, 1)


@csrf_exempt
def raw_renew(request: HttpRequest, lease_id: object) -> JsonResponse:
    epoch = int(json.loads(request.body)["epoch"])
    with connection.cursor() as cursor:
        cursor.execute(SQL, [str(lease_id), epoch, int(request.GET["h"])])
        row = cursor.fetchone()
    if row is None:
        return JsonResponse({"code": "refused"}, status=409)
    return JsonResponse({"lease_id": str(row[0]), "epoch": row[1], "expires_in_ms": row[2]})
