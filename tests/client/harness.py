"""The live-server harness of the SDK tests: a loopback proxy in front of pytest-django's
live server that can hang renewals or answer one with a 503, a clock that moves the SDK's
monotonic time and the database clock seam together, and a takeover done in the database.
The `live` fixture (conftest.py) puts them together for the sync and the async client.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

import httpx

from leaseboard_client import AsyncClient, AsyncRenewer, Client, ClientTiming, Renewer

T = TypeVar("T")

TTL_MS = 3000  # renew_after_ms defaults to 1000, jeopardy_after_ms to 2000
TIMING = ClientTiming(
    request_timeout_s=0.4, renew_interval_s=1.0, safety_margin_s=1.0, drift_rate=0.01
)
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
}


# -- the proxy between the SDK and the live server --------------------------------------------


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    body: Any
    action: str  # forwarded | hung | 503


class Proxy:
    """Loopback HTTP proxy to `upstream`; renew requests can be hung or failed with a 503."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.hang_renewals = False
        self.fail_renewals = 0  # how many renew requests still to answer with a 503
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def renewals(self, action: str | None = None) -> list[Seen]:
        with self._lock:
            return [
                s
                for s in self.seen
                if s.path.endswith("/renew") and (action is None or s.action == action)
            ]

    def requests_to(self, path: str) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.path == path]

    def close(self) -> None:
        self._release.set()  # let hung handlers finish; their clients gave up long ago
        self._server.shutdown()
        self._server.server_close()

    def _decide(self, method: str, path: str, body: Any) -> str:
        with self._lock:
            action = "forwarded"
            if path.endswith("/renew"):
                if self.hang_renewals:
                    action = "hung"
                elif self.fail_renewals > 0:
                    self.fail_renewals -= 1
                    action = "503"
            self.seen.append(Seen(method, path, body, action))
            return action

    def _forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple:
        conn = http.client.HTTPConnection(*self.upstream, timeout=10)
        try:
            conn.request(method, path, body=body or None, headers=headers)
            response = conn.getresponse()
            return response.status, response.reason, response.getheaders(), response.read()
        finally:
            conn.close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._handle()

            def do_POST(self) -> None:
                self._handle()

            def _answer(self, status: int, reason: str, headers: list, data: bytes) -> None:
                self.send_response(status, reason)
                for name, value in headers:
                    if name.lower() not in HOP_BY_HOP | {"server", "date"}:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                action = proxy._decide(self.command, self.path, json.loads(raw) if raw else None)
                if action == "hung":
                    # Accepted and read, never answered: only the client's timeout ends it.
                    proxy._release.wait()
                    self.close_connection = True
                    return
                if action == "503":
                    # What a load balancer in front of a restarting web node answers.
                    body = b"<html><body><h1>503 Service Unavailable</h1></body></html>"
                    self._answer(503, "Service Unavailable", [("Content-Type", "text/html")], body)
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                self._answer(*proxy._forward(self.command, self.path, headers, raw))

        return Handler


# -- clocks and helpers -------------------------------------------------------------------------


class LockstepClock:
    """The SDK's monotonic clock; `skip` moves it and the database clock by the same amount."""

    def __init__(self, db_clock: Any) -> None:
        self.db_clock = db_clock
        self.skipped_s = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.skipped_s

    def skip(self, seconds: float) -> None:
        ms = round(seconds * 1000)
        self.db_clock.advance(ms)
        self.skipped_s += ms / 1000


@dataclass
class Live:
    url: str
    proxy: Proxy
    clock: LockstepClock
    renewer: Renewer
    token: str
    clients: list[Client] = field(default_factory=list)

    def client(self, token: str | None = None) -> Client:
        """An SDK client that talks to the live server through the proxy."""
        client = Client(
            self.proxy.url,
            token or self.token,
            timing=TIMING,
            clock=self.clock,
            renewer=self.renewer,
        )
        self.clients.append(client)
        return client

    def async_client(
        self, renewer: AsyncRenewer, *, timing: ClientTiming = TIMING, token: str | None = None
    ) -> AsyncClient:
        """An asyncio SDK client through the proxy, on the lockstep clock; create it inside
        the event loop that uses it, and close it there (`async with`)."""
        return AsyncClient(
            self.proxy.url, token or self.token, timing=timing, clock=self.clock, renewer=renewer
        )

    def async_renewer(self) -> AsyncRenewer:
        """A renewer driven by hand (`await renewer.tick()`) on the lockstep clock."""
        return AsyncRenewer(clock=self.clock, start_task=False)

    def server_view(self, key: str) -> dict[str, Any]:
        """What the live server says about a work item, asked directly (not via the proxy)."""
        response = httpx.get(
            f"{self.url}/api/v1/work-items/{quote(key, safe='')}",
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=10,
        )
        assert response.status_code == 200, response.text
        return response.json()

    def admitted(self, prefix: str, ttl_ms: int = TTL_MS) -> str:
        """A work item admitted with a short ttl (set up directly, with a patient client)."""
        key = f"{prefix}-{uuid.uuid4().hex[:8]}"
        with Client(self.url, self.token, renewer=self.renewer) as setup:
            assert setup.admit(key, policy={"ttl_ms": ttl_ms}).admission == "admitted"
        return key


def lost_recorder() -> tuple[list[tuple[Any, Any]], Any]:
    calls: list[tuple[Any, Any]] = []
    return calls, lambda holding, error: calls.append((holding, error))


def lease_row(lease_id: str) -> Any:
    from leaseboard.core.models import Lease

    return Lease.objects.get(id=lease_id)


def an_approver() -> Any:
    """An approver to revoke with, made before the hold starts (its real time counts)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from leaseboard.core.authority import Actor
    from tests.builders import ensure_role_groups

    ensure_role_groups()
    user = get_user_model().objects.create(username=f"approver-{uuid.uuid4().hex[:8]}")
    user.groups.add(Group.objects.get(name="approver"))
    return Actor.human(user)


def take_over(work_key: str, lease_id: str, new_holder: Any, approver: Any) -> int:
    """Revoke the lease and grant the work to `new_holder` in one transaction (a takeover)."""
    from django.db import transaction

    from leaseboard.core.clock import db_now_ms
    from leaseboard.core.models import Lease, WorkItem
    from leaseboard.core.services.leases import lease_grant_locked, lease_revoke_locked

    with transaction.atomic():
        now = db_now_ms()
        item = WorkItem.objects.select_for_update().select_related("queue").get(key=work_key)
        lease = Lease.objects.select_for_update().get(id=lease_id)
        lease_revoke_locked(
            lease=lease, actor=approver, now_ms=now, reason="taken over by an operator"
        )
        new = lease_grant_locked(
            item=item,
            holder=new_holder,
            now_ms=now,
            grant_kind=Lease.GrantKind.TAKEOVER,
            takeover_reason="taken over by an operator",
        )
    return new.epoch


async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """Run a Django ORM call off the event loop (and close that thread's connection)."""

    def call() -> T:
        from django.db import connection

        try:
            return fn(*args)
        finally:
            connection.close()

    return await asyncio.to_thread(call)
