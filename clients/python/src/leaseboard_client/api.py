"""HTTP client for Leaseboard's v1 agent API (DESIGN §13); no Django import.

Each call records the monotonic time its request was sent, because the local deadline
is measured from send time. Errors become typed exceptions from `leaseboard_client.errors`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from leaseboard_client.errors import (
    LeaseError,
    ProtocolError,
    TransientError,
    error_for,
)
from leaseboard_client.holding import Holding, Renewer, process_renewer
from leaseboard_client.timing import ClientTiming, TimingError

MAX_BATCH = 1000  # server limit for POST /api/v1/leases/renew


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


@dataclass(frozen=True)
class Renewal:
    lease_id: str
    epoch: int
    certainty: str | None
    expires_in_ms: int
    fencing_token: str | None
    sent_at: float


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


@dataclass(frozen=True)
class EffectDecision:
    effect_id: str
    decision: str  # authorized | pending_approval
    fencing_token: str | None
    idempotency_key: str

    @property
    def authorized(self) -> bool:
        return self.decision == "authorized"


def _need(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = body.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ProtocolError(f"response field {name!r} missing or not {kind}", problem=dict(body))
    return value


class Client:
    """One executor's connection to Leaseboard: base_url + bearer token.

    `transport` accepts any httpx transport (e.g. `httpx.WSGITransport(app=django_app)` or
    `httpx.MockTransport`), so the SDK can be tested in-process without a live server.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timing: ClientTiming | None = None,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
        renewer: Renewer | None = None,
    ) -> None:
        # Validate before any lease exists: a bad timing must not be found mid-holding.
        self.timing = (timing or ClientTiming()).validate()
        self.clock = clock
        self._renewer = renewer
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json, application/problem+json",
                "User-Agent": "leaseboard-client/1",
            },
            timeout=self.timing.request_timeout_s,
            transport=transport,
        )

    @property
    def renewer(self) -> Renewer:
        if self._renewer is None:
            self._renewer = process_renewer()
        return self._renewer

    # -- transport -------------------------------------------------------------------------

    def _call(
        self, method: str, path: str, body: Mapping[str, Any] | None = None
    ) -> tuple[int, dict[str, Any], float]:
        sent_at = self.clock()
        try:
            response = self._http.request(method, path, json=body)
        except httpx.TimeoutException as exc:
            raise TransientError(f"{method} {path} timed out", code="timeout") from exc
        except httpx.TransportError as exc:
            raise TransientError(f"{method} {path}: {exc}", code="network") from exc
        try:
            data = response.json() if response.content else {}
        except ValueError:
            data = None
        if response.status_code >= 400:
            problem = data if isinstance(data, dict) else {}
            raise error_for(problem.get("code"), status=response.status_code, problem=problem)
        if not isinstance(data, dict):
            raise ProtocolError(
                f"{method} {path}: expected a JSON object", status=response.status_code
            )
        return response.status_code, data, sent_at

    # -- API -------------------------------------------------------------------------------

    def admit(
        self,
        key: str,
        queue: str = "default",
        *,
        title: str | None = None,
        scope: Any = None,
        policy: Mapping[str, Any] | None = None,
    ) -> Admission:
        body: dict[str, Any] = {"key": key, "queue": queue}
        for name, value in (("title", title), ("scope", scope), ("policy", policy)):
            if value is not None:
                body[name] = value
        _, data, _ = self._call("POST", "/api/v1/work-items", body)
        return Admission(
            key=_need(data, "key", str),
            admission=_need(data, "admission", str),
            epoch=_need(data, "epoch", int),
            raw=data,
        )

    def work_item(self, key: str) -> dict[str, Any]:
        return self._call("GET", f"/api/v1/work-items/{quote(key, safe='')}")[1]

    def acquire(self, work_key: str, ttl_ms: int | None = None) -> Grant:
        body = {"ttl_ms": ttl_ms} if ttl_ms is not None else {}
        _, data, sent_at = self._call(
            "POST", f"/api/v1/work-items/{quote(work_key, safe='')}/lease", body
        )
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
        )

    def renew(self, lease_id: str, epoch: int) -> Renewal:
        _, data, sent_at = self._call("POST", f"/api/v1/leases/{lease_id}/renew", {"epoch": epoch})
        return Renewal(
            lease_id=str(data.get("lease_id", lease_id)),
            epoch=data.get("epoch", epoch),
            certainty=data.get("certainty"),
            expires_in_ms=_need(data, "expires_in_ms", int),
            fencing_token=data.get("fencing_token"),
            sent_at=sent_at,
        )

    def renew_many(
        self, leases: Iterable[tuple[str, int] | Mapping[str, Any]]
    ) -> list[RenewResult]:
        """Batch renew (POST /api/v1/leases/renew), chunked at the server's limit.

        A failed item is a result with `ok=False` and a typed `error`; a failed request
        raises (TransientError for network/5xx).
        """
        items = [
            {"lease_id": str(x["lease_id"]), "epoch": int(x["epoch"])}
            if isinstance(x, Mapping)
            else {"lease_id": str(x[0]), "epoch": int(x[1])}
            for x in leases
        ]
        results: list[RenewResult] = []
        for start in range(0, len(items), MAX_BATCH):
            chunk = items[start : start + MAX_BATCH]
            _, data, sent_at = self._call("POST", "/api/v1/leases/renew", {"leases": chunk})
            rows = data.get("results")
            if not isinstance(rows, list):
                raise ProtocolError("batch renew answer has no 'results' list", problem=data)
            for row in rows:
                if not isinstance(row, dict) or "lease_id" not in row:
                    raise ProtocolError("batch renew result without lease_id", problem=data)
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
                        error=None
                        if ok
                        else error_for(code or "protocol_error", status=None, problem=row),
                    )
                )
        return results

    def release(self, lease_id: str, epoch: int) -> None:
        self._call("POST", f"/api/v1/leases/{lease_id}/release", {"epoch": epoch})

    def checkpoint(self, lease_id: str, epoch: int, data: Any) -> int:
        _, body, _ = self._call(
            "POST", f"/api/v1/leases/{lease_id}/checkpoints", {"epoch": epoch, "data": data}
        )
        return _need(body, "seq", int)

    def propose_effect(
        self,
        lease_id: str,
        epoch: int,
        kind: str,
        target: str,
        *,
        idempotency_key: str | None = None,
        payload: Any = None,
    ) -> EffectDecision:
        """Record an effect before attempting it; retry with the same idempotency_key."""
        key = idempotency_key or uuid.uuid4().hex
        body: dict[str, Any] = {
            "lease_id": lease_id,
            "epoch": epoch,
            "kind": kind,
            "target": target,
            "idempotency_key": key,
        }
        if payload is not None:
            body["payload"] = payload
        _, data, _ = self._call("POST", "/api/v1/effects", body)
        return EffectDecision(
            effect_id=str(_need(data, "effect_id", (str, int))),
            decision=_need(data, "decision", str),
            fencing_token=data.get("fencing_token"),
            idempotency_key=key,
        )

    def report_outcome(self, effect_id: str, outcome: str, detail: str | None = None) -> None:
        if outcome not in ("applied", "failed", "unknown"):
            raise ValueError("outcome must be applied, failed or unknown")
        body: dict[str, Any] = {"outcome": outcome}
        if detail is not None:
            body["detail"] = detail
        self._call("POST", f"/api/v1/effects/{effect_id}/outcome", body)

    def fencing_keys(self) -> dict[str, Any]:
        return self._call("GET", "/api/v1/fencing/keys")[1]

    # -- holding ---------------------------------------------------------------------------

    def hold(
        self,
        work_key: str,
        *,
        ttl_ms: int | None = None,
        on_lost: Callable[[Holding, LeaseError], None] | None = None,
        renew: bool = True,
    ) -> Holding:
        """Acquire and keep renewing in the process-wide renewer; usable as a context manager.

        The lease's timing is checked against this client's before work starts; a lease we
        could not keep alive is released at once and TimingError raised.
        """
        if ttl_ms is not None:
            self.timing.validate_lease(ttl_ms=ttl_ms, renew_after_ms=None)
        grant = self.acquire(work_key, ttl_ms=ttl_ms)
        try:
            self.timing.validate_lease(ttl_ms=grant.ttl_ms, renew_after_ms=grant.renew_after_ms)
        except TimingError:
            try:
                self.release(grant.lease_id, grant.epoch)
            except LeaseError:
                pass  # the lease expires by itself; the timing error is what the caller needs
            raise
        holding = Holding(self, grant, on_lost=on_lost)
        if renew:
            self.renewer.register(holding)
        return holding

    def close(self) -> None:
        if self._renewer is not None:
            self._renewer.forget_client(self)
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
