"""The v1 agent and recipient API (docs/design.md §13). Thin: parse, call a service, shape JSON.
The recipients' endpoints are api/recipients.py's router, mounted at the end."""

from __future__ import annotations

import logging
from typing import Any

from django.http import HttpRequest
from ninja import Path, Status
from ninja.security import HttpBearer

from leaseboard.api import recipients as recipients_api
from leaseboard.api import schemas as s
from leaseboard.api.errors import problem_handlers_install
from leaseboard.api.jsoncodec import OrjsonParser, OrjsonRenderer
from leaseboard.api.openapi import ContractAPI, problems
from leaseboard.core.authority import Actor
from leaseboard.core.models import Executor
from leaseboard.core.selectors import work_item_state
from leaseboard.core.services import effects as effect_services
from leaseboard.core.services import leases as lease_services
from leaseboard.core.services import reconciliation
from leaseboard.core.services.executors import executor_for_token
from leaseboard.core.services.policy import policy_explain
from leaseboard.core.services.work import KEY_PATTERN, KEY_RULE, work_admit, work_complete

log = logging.getLogger(__name__)


class AgentBearer(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Executor | None:
        executor = executor_for_token(token)
        if executor is None or executor.kind != Executor.Kind.AGENT:
            return None
        return executor


api = ContractAPI(
    title="Leaseboard API",
    version="1",
    urls_namespace="api-v1",
    auth=AgentBearer(),
    openapi_url="/openapi.json",
    docs_url="/docs",
    description="Renewable, fenced leases on work. Every refusal is an RFC 9457 problem "
    "(application/problem+json) with a stable `code`. Work item keys: " + KEY_RULE + ".",
    problem_schema=s.Problem,
    renderer=OrjsonRenderer(),
    parser=OrjsonParser(),
)

# Path parameters, declared once: a key outside the alphabet is a 400 before any lookup.
WorkKeyPath = Path(..., pattern=KEY_PATTERN, max_length=200, description=KEY_RULE)
LeaseIdPath = EffectIdPath = Path(..., max_length=64)
WORK, LEASES, EFFECTS, POLICY = ["work-items"], ["leases"], ["effects"], ["policy"]


problem_handlers_install(api)


def _executor(request: HttpRequest) -> Executor:
    return request.auth  # type: ignore[attr-defined,no-any-return]


# deliberate: each operation declares its whole contract (path, response, operation id, tag,
# refusals) at its handler and passes the body's fields by name: alike in shape, each its own
# row of the OpenAPI document; a generic wrapper would hide the contract the handler serves.
@api.post(
    "/work-items",
    response={200: s.WorkItemCreated, 201: s.WorkItemCreated},
    operation_id="admit_work_item",
    tags=WORK,
    openapi_extra=problems(400, 401, 403, 404, 409),
)
def admit(request: HttpRequest, body: s.WorkItemIn) -> Status[dict[str, Any]]:
    """Admit a work item (201), or answer an existing key's state (200). A full queue
    rejects (`admission: rejected`, `code: capacity_exhausted`) or queues it (`waiting`).
    Only into a queue this agent's credential may use (403 `queue_not_allowed`); a key
    already admitted to another queue is 409 `idempotency_conflict` naming that queue."""
    item, created = work_admit(
        key=body.key,
        queue_name=body.queue,
        title=body.title,
        scope=body.scope,
        timing=body.policy.model_dump(exclude_none=True),
        by=_executor(request),
    )
    out: dict[str, Any] = {"key": item.key, "admission": item.admission, "epoch": item.epoch}
    if item.admission == "rejected":
        out["code"] = "capacity_exhausted"
    return Status(201 if created else 200, out)


@api.get(
    "/work-items/{key}",
    response={200: s.WorkItemOut},
    operation_id="get_work_item",
    tags=WORK,
    openapi_extra=problems(400, 401, 404),
)
def work_item(request: HttpRequest, key: str = WorkKeyPath) -> dict[str, Any]:
    state = work_item_state(key=key)
    lease = state.lease
    return {
        "key": state.item.key,
        "queue": state.item.queue.name,
        "title": state.item.title,
        "admission": state.item.admission,
        "status": state.item.status,
        "epoch": state.item.epoch,
        "holder": lease.holder.name if lease else None,
        "holder_kind": lease.holder.kind if lease else None,
        "lease_id": str(lease.id) if lease else None,
        "generation": lease.generation if lease else None,
        "certainty": state.certainty,
        "expires_in_ms": state.expires_in_ms,
    }


@api.post(
    "/work-items/{key}/lease",
    response={201: s.LeaseGranted},
    operation_id="acquire_lease",
    tags=LEASES,
    openapi_extra=problems(400, 401, 403, 404, 409, retry_after=(409,)),
)
def acquire(request: HttpRequest, key: str = WorkKeyPath, body: s.AcquireIn | None = None):  # type: ignore[no-untyped-def]
    """Acquire a lease at a new epoch; the body is optional. Refusals: work_leased,
    lock_delay (with Retry-After), needs_reconciliation, work_not_admitted, on_hold (an
    operator holds the work item; `reason` says why), queue_not_allowed (403: not a queue
    this agent's credential may use)."""
    grant = lease_services.lease_acquire(
        work_key=key, executor=_executor(request), ttl_ms=body.ttl_ms if body else None
    )
    lease = grant.lease
    checkpoint = grant.checkpoint
    return Status(
        201,
        {
            "lease_id": str(lease.id),
            "work_key": key,
            "epoch": lease.epoch,
            "generation": lease.generation,
            "ttl_ms": lease.ttl_ms,
            "renew_after_ms": lease.renew_after_ms,
            "jeopardy_after_ms": lease.jeopardy_after_ms,
            "expires_in_ms": grant.expires_in_ms,
            "fencing_token": grant.fencing_token,
            "checkpoint": (
                {"seq": checkpoint.seq, "epoch": checkpoint.epoch, "data": checkpoint.data}
                if checkpoint
                else None
            ),
        },
    )


@api.post(
    "/work-items/{key}/complete",
    response={200: s.CompleteOut},
    operation_id="complete_work_item",
    tags=WORK,
    openapi_extra=problems(400, 401, 403, 404, 409),
)
def complete(request: HttpRequest, body: s.CompleteIn, key: str = WorkKeyPath) -> dict[str, Any]:
    item = work_complete(
        lease_id=body.lease_id, executor=_executor(request), epoch=body.epoch, work_key=key
    )
    return {"key": item.key, "status": item.status, "epoch": item.epoch}


@api.post(
    "/leases/renew",
    response={200: s.BatchRenewOut},
    operation_id="renew_leases",
    tags=LEASES,
    openapi_extra=problems(400, 401),
)
def renew_many(request: HttpRequest, body: s.BatchRenewIn) -> dict[str, Any]:
    results = lease_services.lease_renew_many(
        executor=_executor(request), items=[(i.lease_id, i.epoch) for i in body.leases]
    )
    return {"results": [r.__dict__ for r in results]}


@api.post(
    "/leases/{lease_id}/renew",
    response={200: s.RenewOut},
    operation_id="renew_lease",
    tags=LEASES,
    openapi_extra=problems(400, 401, 403, 404, 409),
)
def renew(
    request: HttpRequest, body: s.EpochIn, lease_id: s.UuidPath = LeaseIdPath
) -> dict[str, Any]:
    r = lease_services.lease_renew(lease_id=lease_id, executor=_executor(request), epoch=body.epoch)
    return {
        "lease_id": str(r.lease_id),
        "epoch": r.epoch,
        "certainty": r.certainty,
        "expires_in_ms": r.expires_in_ms,
        "on_hold": bool(r.hold_reason),
        "hold_reason": r.hold_reason or None,
    }


@api.post(
    "/leases/{lease_id}/release",
    response={200: s.ReleaseOut},
    operation_id="release_lease",
    tags=LEASES,
    openapi_extra=problems(400, 401, 403, 404, 409),
)
def release(
    request: HttpRequest, body: s.EpochIn, lease_id: s.UuidPath = LeaseIdPath
) -> dict[str, Any]:
    lease = lease_services.lease_release(
        lease_id=lease_id, executor=_executor(request), epoch=body.epoch
    )
    return {"lease_id": str(lease.id), "epoch": lease.epoch, "state": lease.state}


@api.post(
    "/leases/{lease_id}/checkpoints",
    response={201: s.CheckpointCreated},
    operation_id="save_checkpoint",
    tags=LEASES,
    openapi_extra=problems(400, 401, 403, 404, 409),
)
def checkpoint(request: HttpRequest, body: s.CheckpointIn, lease_id: s.UuidPath = LeaseIdPath):  # type: ignore[no-untyped-def]
    cp = lease_services.lease_checkpoint(
        lease_id=lease_id, executor=_executor(request), epoch=body.epoch, data=body.data
    )
    return Status(201, {"seq": cp.seq, "epoch": cp.epoch})


@api.post(
    "/effects",
    response={201: s.EffectOut, 202: s.EffectOut},
    operation_id="propose_effect",
    tags=EFFECTS,
    openapi_extra=problems(400, 401, 403, 404, 409),
)
def propose_effect(request: HttpRequest, body: s.EffectIn):  # type: ignore[no-untyped-def]
    effect = effect_services.effect_propose(
        lease_id=body.lease_id,
        executor=_executor(request),
        epoch=body.epoch,
        kind=body.kind,
        target=body.target,
        idempotency_key=body.idempotency_key,
        payload=body.payload,
    )
    out = {"effect_id": str(effect.id), "decision": effect.decision, "epoch": effect.epoch}
    if effect.decision == "authorized":
        return Status(201, {**out, "fencing_token": effect.fencing_token})
    return Status(202, {**out, "rule": effect.rule_name or None})


@api.post(
    "/policy/explain",
    response={200: s.PolicyExplainOut},
    operation_id="explain_policy",
    tags=POLICY,
    openapi_extra=problems(400, 401, 404),
)
def explain_policy(request: HttpRequest, body: s.PolicyExplainIn) -> dict[str, Any]:
    """Which of the queue's rules would decide this proposed effect now, and why (nothing
    is recorded). With `work_key`, the evidence is that work item's."""
    e = policy_explain(
        kind=body.kind,
        target=body.target,
        payload=body.payload,
        queue_name=body.queue,
        work_key=body.work_key,
        executor=_executor(request),
    )
    return {
        "queue": e.queue,
        "policy_version": e.version,
        "decision": e.ruling.decision,
        "rule": e.ruling.rule,
        "reason": e.ruling.reason,
        "steps": [step.__dict__ for step in e.ruling.steps],
        "facts": e.facts,
        "error": e.ruling.error or None,
    }


@api.post(
    "/effects/{effect_id}/outcome",
    response={200: s.OutcomeOut},
    operation_id="report_outcome",
    tags=EFFECTS,
    openapi_extra=problems(400, 401, 403, 404),
)
def report_outcome(
    request: HttpRequest, body: s.OutcomeIn, effect_id: s.UuidPath = EffectIdPath
) -> dict[str, Any]:
    effect = effect_services.effect_report_outcome(
        effect_id=effect_id, executor=_executor(request), outcome=body.outcome, detail=body.detail
    )
    return {"effect_id": str(effect.id), "outcome": effect.outcome}


@api.post(
    "/effects/{effect_id}/reconcile",
    response={200: s.ReconcileOut},
    operation_id="reconcile_effect",
    tags=EFFECTS,
    openapi_extra=problems(400, 401, 403, 404, 409),
)
def reconcile(
    request: HttpRequest, body: s.ReconcileIn, effect_id: s.UuidPath = EffectIdPath
) -> dict[str, Any]:
    effect = reconciliation.effect_reconcile(
        effect_id=effect_id,
        actor=Actor.agent(_executor(request)),
        resolution=body.resolution,
        note=body.note,
        lease_id=body.lease_id,
        epoch=body.epoch,
        request_id=request.META.get("HTTP_X_REQUEST_ID", ""),
    )
    return {"effect_id": str(effect.id), "resolution": effect.resolution}


# The recipients' endpoints (api/recipients.py) authenticate agents too, so that the
# authority table, not a missing credential, refuses them (403 forbidden): an agent cannot
# speak for a recipient. Mounted at the root after this module's operations, so the OpenAPI
# document lists them last, as it always has.
RECIPIENT_OR_AGENT = [recipients_api.RecipientBearer(), AgentBearer()]
api.add_router("", recipients_api.router, auth=RECIPIENT_OR_AGENT)
