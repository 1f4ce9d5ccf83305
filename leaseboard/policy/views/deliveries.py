"""The delivery log: what every notification target was sent, what failed and why, and
the dead letters (deliveries given up). Admins only; read-only."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from leaseboard.domain.authority import Act
from leaseboard.sweeps.deliveries import STATUSES, delivery_log
from leaseboard.web.pages import render_page
from leaseboard.web.roles import act_required


@require_GET
@act_required(Act.MANAGE_WEBHOOKS)
def deliveries(request: HttpRequest) -> HttpResponse:
    log = delivery_log(status=request.GET.get("status", ""))
    return render_page(request, "policy/deliveries.html", {"log": log, "statuses": STATUSES})
