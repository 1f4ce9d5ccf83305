"""The executor page, and quarantining an agent (deactivate its credential, revoke all its
leases, one reason) or lifting its quarantine."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from leaseboard.core.replicas import reads_from_replica
from leaseboard.core.services import supervision
from leaseboard.dashboard.forms import LiftForm, ReasonForm
from leaseboard.dashboard.selectors import executor as executor_reads
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import LeaseboardError, NotFound
from leaseboard.web.htmx import page_or_fragment
from leaseboard.web.pages import render_page
from leaseboard.web.params import reason_posted
from leaseboard.web.refusals import refuse
from leaseboard.web.roles import act_required, acting


@require_GET
@act_required(Act.WATCH)
@reads_from_replica
def executor(request: HttpRequest, pk: int) -> HttpResponse:
    page = executor_reads.executor_page(executor_id=pk)
    if page is None:
        raise Http404("no such executor")
    context = {
        "page": page,
        "quarantine_form": ReasonForm(auto_id="quarantine-%s"),
        "lift_form": LiftForm(auto_id="lift-%s"),
    }
    return page_or_fragment(render_page(request, "dashboard/executor.html", context))


@require_POST
@act_required(Act.QUARANTINE)
def agent_quarantine(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        result = supervision.agent_quarantine(
            executor_id=pk,
            **reason_posted(request),
            **acting(request),
        )
    except NotFound:
        raise Http404("no such executor") from None
    except LeaseboardError as exc:
        refuse(request, exc, prefix="Quarantine: ")
    else:
        name = result.quarantine.executor.name
        if result.changed:
            messages.success(
                request,
                f"{name} is quarantined: its credential is deactivated and "
                f"{len(result.revoked)} live lease(s) were revoked.",
            )
        else:
            messages.info(request, f"{name} was already quarantined; nothing changed.")
    return redirect("dashboard:executor", pk=pk)


@require_POST
@act_required(Act.LIFT_QUARANTINE)
def agent_quarantine_lift(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        quarantine = supervision.agent_quarantine_lift(
            executor_id=pk, note=request.POST.get("note", ""), **acting(request)
        )
    except NotFound:
        raise Http404("no such executor") from None
    except LeaseboardError as exc:
        refuse(request, exc, prefix="Lift quarantine: ")
    else:
        messages.success(
            request,
            f"Quarantine of {quarantine.executor.name} lifted: its credential works again.",
        )
    return redirect("dashboard:executor", pk=pk)
