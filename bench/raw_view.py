"""The very same fenced renew UPDATE as the API's fast path in a plain view, with no auth,
no schema and no service layer, but inside the project's full middleware stack (served by
the API's gunicorn through bench/settings_bench.py). Beside the bare project's renew
(bench/bare/), the difference is what the project's middleware and settings cost."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from bench.bare.views import renew_answer
from leaseboard.core.sql import POSTGRESQL, lease_renew

SQL = lease_renew(POSTGRESQL, 1)


@csrf_exempt
def raw_renew(request: HttpRequest, lease_id: object) -> JsonResponse:
    return renew_answer(SQL, request, lease_id)
