"""The v1 API on the wire, with no I/O: each call as a `Call`, each answer parsed into a
typed value or a typed error. `Client` (sync) and `AsyncClient` (asyncio) only move bytes.

Answers keep the monotonic time their request was *sent*, because the local deadline is
measured from send time (docs/design.md §3).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from leaseboard_client.errors import LeaseError, ProtocolError, error_for
from leaseboard_client.version import API_VERSION

PREFIX = f"/api/v{API_VERSION}"
MAX_BATCH = 1000  # server limit for POST /api/v1/leases/renew
OUTCOMES = ("applied", "failed", "unknown")
HEADERS = {"Accept": "application/json, application/problem+json"}


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    body: dict[str, Any] | None = None


@dataclass(frozen=True)
class Admission:
    key: str
    admission: str  # admitted | waiting | rejected
    epoch: int
    raw: Mapping[str, Any]


@dataclass(frozen=True)
class Grant:
    lease_id: str
    work_key: str
    epoch: int
    ttl_ms: int
    renew_after_ms: int | None
    expires_in_ms: int
    fencing_token: str | None
    checkpoint: Any
    sent_at: float  # monotonic time the acquire request was sent
    # The fencing order is (generation, epoch) (docs/design.md §5); 0 from older servers.
    generation: int = 0


@dataclass(frozen=True)
class Renewal:
    lease_id: str
    epoch: int
    certainty: str | None
    expires_in_ms: int
    fencing_token: str | None
    sent_at: float
    hold_reason: str | None = None  # an operator holds the lease: no new effects for now


@dataclass(frozen=True)
class RenewResult:
    lease_id: str
    ok: bool
    code: str | None
    expires_in_ms: int | None
    epoch: int | None
    fencing_token: str | None
    sent_at: float
    error: LeaseError | None  # the typed error for a failed item
    hold_reason: str | None = None


@dataclass(frozen=True)
class EffectDecision:
    effect_id: str
    decision: str  # authorized | pending_approval
    fencing_token: str | None
    idempotency_key: str
    rule: str | None = None  # the commit-time rule that holds it for approval, if one does

    @property
    def authorized(self) -> bool:
        return self.decision == "authorized"


def _need(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = body.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ProtocolError(f"response field {name!r} missing or not {kind}", problem=dict(body))
    return value


def _key(work_key: str) -> str:
    return quote(work_key, safe="")


def answer(call: Call, status: int, content: bytes) -> dict[str, Any]:
    """The JSON object of a 2xx answer, or the typed error of any other."""
    try:
        json_body = json.loads(content) if content else None
    except ValueError:
        json_body = None  # a proxy's HTML error page, say
    if status >= 400:
        problem = json_body if isinstance(json_body, dict) else {}
        raise error_for(problem.get("code"), status=status, problem=problem)
    if not content:
        return {}
    if not isinstance(json_body, dict):
        raise ProtocolError(f"{call.method} {call.path}: expected a JSON object", status=status)
    return json_body


# -- work items ------------------------------------------------------------------------------


def admit(
    key: str, queue: str, *, title: str | None, scope: Any, policy: Mapping[str, Any] | None
) -> Call:
    body: dict[str, Any] = {"key": key, "queue": queue}
    for name, value in (("title", title), ("scope", scope), ("policy", policy)):
        if value is not None:
            body[name] = value
    return Call("POST", f"{PREFIX}/work-items", body)


def admission(data: Mapping[str, Any]) -> Admission:
    return Admission(
        key=_need(data, "key", str),
        admission=_need(data, "admission", str),
        epoch=_need(data, "epoch", int),
        raw=data,
    )


def work_item(key: str) -> Call:
    return Call("GET", f"{PREFIX}/work-items/{_key(key)}")


# -- leases -----------------------------------------------------------------------------------


def acquire(work_key: str, ttl_ms: int | None) -> Call:
    body = {"ttl_ms": ttl_ms} if ttl_ms is not None else {}
    return Call("POST", f"{PREFIX}/work-items/{_key(work_key)}/lease", body)


def grant(data: Mapping[str, Any], *, work_key: str, sent_at: float) -> Grant:
    return Grant(
        lease_id=str(_need(data, "lease_id", str)),
        work_key=data.get("work_key", work_key),
        epoch=_need(data, "epoch", int),
        ttl_ms=_need(data, "ttl_ms", int),
        renew_after_ms=data.get("renew_after_ms"),
        expires_in_ms=_need(data, "expires_in_ms", int),
        fencing_token=data.get("fencing_token"),
        checkpoint=data.get("checkpoint"),
        sent_at=sent_at,
        generation=_generation(data),
    )


def _generation(data: Mapping[str, Any]) -> int:
    value = data.get("generation")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def renew(lease_id: str, epoch: int) -> Call:
    return Call("POST", f"{PREFIX}/leases/{lease_id}/renew", {"epoch": epoch})


def renewal(data: Mapping[str, Any], *, lease_id: str, epoch: int, sent_at: float) -> Renewal:
    return Renewal(
        lease_id=str(data.get("lease_id", lease_id)),
        epoch=data.get("epoch", epoch),
        certainty=data.get("certainty"),
        expires_in_ms=_need(data, "expires_in_ms", int),
        fencing_token=data.get("fencing_token"),
        sent_at=sent_at,
        hold_reason=_hold(data),
    )


def _hold(data: Mapping[str, Any]) -> str | None:
    """The hold an answer carries: its reason, or None when not on hold."""
    if not data.get("on_hold"):
        return None
    reason = data.get("hold_reason")
    return str(reason) if reason else "on hold"


def renew_batches(leases: Iterable[tuple[str, int] | Mapping[str, Any]]) -> list[Call]:
    """Batch renew requests, chunked at the server's limit."""
    items = [
        {"lease_id": str(x["lease_id"]), "epoch": int(x["epoch"])}
        if isinstance(x, Mapping)
        else {"lease_id": str(x[0]), "epoch": int(x[1])}
        for x in leases
    ]
    return [
        Call("POST", f"{PREFIX}/leases/renew", {"leases": items[start : start + MAX_BATCH]})
        for start in range(0, len(items), MAX_BATCH)
    ]


def renew_results(data: Mapping[str, Any], *, sent_at: float) -> list[RenewResult]:
    """One result per lease; a refused item carries its typed `error`."""
    rows = data.get("results")
    if not isinstance(rows, list):
        raise ProtocolError("batch renew answer has no 'results' list", problem=dict(data))
    results = []
    for row in rows:
        if not isinstance(row, dict) or "lease_id" not in row:
            raise ProtocolError("batch renew result without lease_id", problem=dict(data))
        ok = bool(row.get("ok"))
        code = row.get("code")
        results.append(
            RenewResult(
                lease_id=str(row["lease_id"]),
                ok=ok,
                code=code,
                expires_in_ms=row.get("expires_in_ms"),
                epoch=row.get("epoch"),
                fencing_token=row.get("fencing_token"),
                sent_at=sent_at,
                error=None if ok else error_for(code or "protocol_error", status=None, problem=row),
                hold_reason=_hold(row),
            )
        )
    return results


def release(lease_id: str, epoch: int) -> Call:
    return Call("POST", f"{PREFIX}/leases/{lease_id}/release", {"epoch": epoch})


def checkpoint(lease_id: str, epoch: int, data: Any) -> Call:
    return Call("POST", f"{PREFIX}/leases/{lease_id}/checkpoints", {"epoch": epoch, "data": data})


def checkpoint_seq(data: Mapping[str, Any]) -> int:
    seq: int = _need(data, "seq", int)
    return seq


# -- effects ------------------------------------------------------------------------------------


def new_idempotency_key() -> str:
    """A fresh idempotency key for a proposal (keep it: a retry must reuse it)."""
    return uuid.uuid4().hex


def propose(
    lease_id: str,
    epoch: int,
    kind: str,
    target: str,
    *,
    idempotency_key: str | None,
    payload: Any,
) -> tuple[Call, str]:
    """The proposal and its idempotency key (a fresh one unless given: retry with it)."""
    key = idempotency_key or new_idempotency_key()
    body: dict[str, Any] = {
        "lease_id": lease_id,
        "epoch": epoch,
        "kind": kind,
        "target": target,
        "idempotency_key": key,
    }
    if payload is not None:
        body["payload"] = payload
    return Call("POST", f"{PREFIX}/effects", body), key


def decision(data: Mapping[str, Any], *, idempotency_key: str) -> EffectDecision:
    return EffectDecision(
        effect_id=str(_need(data, "effect_id", (str, int))),
        decision=_need(data, "decision", str),
        fencing_token=data.get("fencing_token"),
        idempotency_key=idempotency_key,
        rule=data.get("rule") or None,
    )


def outcome(effect_id: str, outcome: str, detail: str | None) -> Call:
    if outcome not in OUTCOMES:
        raise ValueError("outcome must be applied, failed or unknown")
    body: dict[str, Any] = {"outcome": outcome}
    if detail is not None:
        body["detail"] = detail[:1000]  # the server's bound on a detail
    return Call("POST", f"{PREFIX}/effects/{effect_id}/outcome", body)


def fencing_keys() -> Call:
    return Call("GET", f"{PREFIX}/fencing/keys")
