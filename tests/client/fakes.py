"""A fake monotonic clock and just enough of the v1 API (an httpx.MockTransport handler)
for the SDK's unit tests, sync and async alike."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx

from leaseboard_client import (
    AsyncClient,
    AsyncRenewer,
    Client,
    ClientTiming,
    LeaseLost,
    LeaseRevoked,
    NotHolder,
    Renewer,
    StaleEpoch,
)

TIMING = ClientTiming(
    request_timeout_s=1.0, renew_interval_s=5.0, safety_margin_s=1.0, drift_rate=0.01
)


URL = "http://leaseboard.test"

# The server's answers to a renew that end a holding at once, and the SDK error each raises
# (sync and async alike): the cases of the authoritative-refusal tests.
AUTHORITATIVE_REFUSALS = [
    ("lease_revoked", LeaseRevoked),
    ("stale_epoch", StaleEpoch),
    ("not_holder", NotHolder),
    ("lease_expired", LeaseLost),
]


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


class FakeServer:
    """Just enough of the v1 API for SDK logic; `latency_s` advances the clock per request."""

    def __init__(self, clock: FakeClock, *, ttl_ms: int = 15_000) -> None:
        self.clock = clock
        self.ttl_ms = ttl_ms
        self.renew_after_ms = ttl_ms // 3
        self.latency_s = 0.0
        self.requests: list[tuple[str, str, Any]] = []
        # Answered before anything else: a response, an exception to raise, or a handler.
        self.fail_next: list[Any] = []
        self.lease_codes: dict[str, str] = {}  # lease_id -> refusal code on renew
        self.epochs: dict[str, int] = {}
        self.raw_paths: list[str] = []
        self.expires_at: dict[str, float] = {}  # lease_id -> when this server lets it go
        self.held: dict[str, str] = {}  # lease_id -> an operator's hold reason

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.requests.append((request.method, request.url.path, body))
        self.raw_paths.append(request.url.raw_path.decode())
        self.clock.now += self.latency_s  # the answer arrives later than the request left
        if self.fail_next:
            failure = self.fail_next.pop(0)
            if isinstance(failure, Exception):
                raise failure
            if callable(failure):  # a handler of its own: it may hang, sleep or raise
                return failure(request)
            return failure
        path = request.url.path
        if path.endswith("/lease"):
            key = path.split("/")[-2]
            self.epochs[key] = self.epochs.get(key, 0) + 1
            lease_id = str(uuid.uuid4())
            self.expires_at[lease_id] = self.clock.now + (body.get("ttl_ms") or self.ttl_ms) / 1000
            return httpx.Response(
                201,
                json={
                    "lease_id": lease_id,
                    "work_key": key,
                    "epoch": self.epochs[key],
                    "ttl_ms": body.get("ttl_ms") or self.ttl_ms,
                    "renew_after_ms": self.renew_after_ms,
                    "expires_in_ms": body.get("ttl_ms") or self.ttl_ms,
                    "fencing_token": "tok-acquire",
                    "checkpoint": {"step": 3},
                },
            )
        if path == "/api/v1/leases/renew":
            results = []
            for item in body["leases"]:
                code = self.lease_codes.get(item["lease_id"])
                if code:
                    results.append({"lease_id": item["lease_id"], "ok": False, "code": code})
                else:
                    self.expires_at[item["lease_id"]] = self.clock.now + self.ttl_ms / 1000
                    results.append(
                        {
                            "lease_id": item["lease_id"],
                            "ok": True,
                            "expires_in_ms": self.ttl_ms,
                            "epoch": item["epoch"],
                            "fencing_token": "tok-renewed",
                            "on_hold": item["lease_id"] in self.held,
                            "hold_reason": self.held.get(item["lease_id"]),
                        }
                    )
            return httpx.Response(200, json={"results": results})
        if path.endswith("/renew"):
            return httpx.Response(
                200,
                json={
                    "lease_id": path.split("/")[-2],
                    "epoch": body["epoch"],
                    "certainty": "active",
                    "expires_in_ms": self.ttl_ms,
                    "fencing_token": "tok-renewed",
                    "on_hold": path.split("/")[-2] in self.held,
                    "hold_reason": self.held.get(path.split("/")[-2]),
                },
            )
        if path.endswith("/release") or path.endswith("/outcome"):
            return httpx.Response(200, json={})
        if path == "/api/v1/effects":
            if body["kind"] == "wire":
                return httpx.Response(202, json={"effect_id": "e2", "decision": "pending_approval"})
            return httpx.Response(
                201, json={"effect_id": "e1", "decision": "authorized", "fencing_token": "tok-e1"}
            )
        return httpx.Response(404, json={"code": "not_found", "title": "No such path"})

    def count(self, path: str) -> int:
        return sum(1 for _, p, _ in self.requests if p == path)


def _offline(server: FakeServer, renewer: Any, timing: ClientTiming) -> dict[str, Any]:
    return {
        "timing": timing,
        "transport": httpx.MockTransport(server),
        "clock": server.clock,
        "renewer": renewer,
    }


def offline_client(server: FakeServer, renewer: Renewer, timing: ClientTiming = TIMING) -> Client:
    """The SDK against the fake server, on its clock: no network, no thread."""
    return Client(URL, "agent-token", **_offline(server, renewer, timing))


def offline_async_client(
    server: FakeServer, renewer: AsyncRenewer | None, timing: ClientTiming = TIMING
) -> AsyncClient:
    """The asyncio SDK against the fake server (`renewer` None: the loop's own)."""
    return AsyncClient(URL, "agent-token", **_offline(server, renewer, timing))


def granted_then_lost(server: FakeServer, granted: list[tuple[str, int]]):  # type: ignore[no-untyped-def]
    """An acquire the server grants but whose answer never arrives (a timeout)."""

    def handler(request: httpx.Request) -> httpx.Response:
        waiting, server.fail_next[:] = server.fail_next[:], []
        answer = server(request)  # the grant happens...
        server.fail_next[:] = waiting
        server.requests.pop()  # (recorded once, by the call that ran this handler)
        lease = answer.json()
        granted.append((lease["lease_id"], lease["epoch"]))
        raise httpx.ReadTimeout("timed out", request=request)  # ...its answer is lost

    return handler


def own_lease_in_the_way(granted: list[tuple[str, int]]):  # type: ignore[no-untyped-def]
    def handler(request: httpx.Request) -> httpx.Response:
        lease_id, epoch = granted[0]
        return httpx.Response(
            409,
            json={
                "code": "work_leased",
                "status": 409,
                "detail": "job-1 is leased (by you)",
                "lease_id": lease_id,
                "current_epoch": epoch,
            },
            headers={"Content-Type": "application/problem+json"},
        )

    return handler
