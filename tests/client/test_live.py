"""The agent SDK against a real running Leaseboard (pytest-django's live server, real HTTP).

Between the SDK and the live server sits a tiny loopback HTTP proxy that can make renewals
hang (it reads the request and never answers) or answer exactly one renewal with a real
HTTP 503; everything else it forwards unchanged. The renewer is driven by hand
(`Renewer(start_thread=False).tick()`), and time is moved in lockstep on both sides: the
SDK's monotonic clock and the database clock seam (DESIGN §3) skip by the same amount, on
top of real time, so nothing waits out a ttl for real.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import pytest

from leaseboard_client import (
    Client,
    ClientTiming,
    Holding,
    LeaseError,
    LeaseExpired,
    LeaseRevoked,
    LocalJeopardy,
    Renewer,
    StaleEpoch,
    TransientError,
    process_renewer,
)

pytestmark = pytest.mark.postgres

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
    clients: list[Client]

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

    def server_view(self, key: str) -> dict[str, Any]:
        """What the live server says about a work item, asked directly (not via the proxy)."""
        response = httpx.get(
            f"{self.url}/api/v1/work-items/{quote(key, safe='')}",
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=10,
        )
        assert response.status_code == 200, response.text
        return response.json()

    def admitted(self, prefix: str) -> str:
        """A work item admitted with a short ttl (set up directly, with a patient client)."""
        key = f"{prefix}-{uuid.uuid4().hex[:8]}"
        with Client(self.url, self.token, renewer=self.renewer) as setup:
            assert setup.admit(key, policy={"ttl_ms": TTL_MS}).admission == "admitted"
        return key


@pytest.fixture
def live(live_server, agent, db_clock) -> Iterator[Live]:  # type: ignore[no-untyped-def]
    _, token = agent()
    # Warm the server up so the SDK's short request timeout measures steady-state latency.
    httpx.get(f"{live_server.url}/api/v1/fencing/keys", timeout=30).raise_for_status()
    clock = LockstepClock(db_clock)
    proxy = Proxy(live_server.url)
    state = Live(
        url=live_server.url,
        proxy=proxy,
        clock=clock,
        renewer=Renewer(clock=clock, start_thread=False),
        token=token,
        clients=[],
    )
    try:
        yield state
    finally:
        for client in state.clients:
            client.close()
        proxy.close()


def lost_recorder() -> tuple[list[tuple[Holding, LeaseError]], Any]:
    calls: list[tuple[Holding, LeaseError]] = []
    return calls, lambda holding, error: calls.append((holding, error))


def lease_row(lease_id: str) -> Any:
    from leaseboard.core.models import Lease

    return Lease.objects.get(id=lease_id)


# -- 1. hung renewals: local jeopardy before the server expires the lease ------------------


def test_hung_renewals_put_the_sdk_in_jeopardy_before_the_server_expires_the_lease(
    live: Live,
) -> None:
    client = live.client()
    key = live.admitted("hang")
    lost, on_lost = lost_recorder()
    holding = client.hold(key, ttl_ms=TTL_MS, on_lost=on_lost)
    assert holding.ttl_ms == TTL_MS and holding.interval_s == 1.0

    # Healthy first: a renewal goes through the proxy to the server and moves the deadline.
    first_deadline = holding.deadline
    live.clock.skip(1.0)
    live.renewer.tick()
    assert [s.action for s in live.proxy.renewals()] == ["forwarded"]
    assert holding.deadline > first_deadline and holding.consecutive_failures == 0

    # Now every renewal hangs: the proxy reads it and never answers.
    live.proxy.hang_renewals = True
    hang_started = live.clock()
    last_ack_sent_at = holding.last_ack_sent_at
    view: dict[str, Any] | None = None
    for _ in range(400):
        try:
            holding.ensure()
        except LocalJeopardy:
            # The very moment guarded calls start refusing: ask the server directly.
            detected_at = live.clock()
            view = live.server_view(key)
            break
        live.renewer.tick()
        live.clock.skip(0.05)
    assert view is not None, "the SDK never entered local jeopardy"

    # The server still gives this holder standing: the SDK stopped itself early.
    assert view["lease_id"] == holding.lease_id
    assert view["certainty"] in ("active", "jeopardy"), view
    assert view["expires_in_ms"] > 0, view
    # Seen from the local deadline itself (this loop notices it up to one hung request late),
    # the server had about the safety margin left.
    server_left_at_deadline = view["expires_in_ms"] / 1000 + (detected_at - holding.deadline)
    assert server_left_at_deadline > TIMING.safety_margin_s / 2, server_left_at_deadline
    # Jeopardy was measured from when the last acknowledged renewal was SENT.
    assert holding.last_ack_sent_at == last_ack_sent_at
    assert detected_at >= holding.deadline
    assert holding.deadline == pytest.approx(
        last_ack_sent_at + TTL_MS / 1000 * (1 - TIMING.drift_rate) - TIMING.safety_margin_s,
        abs=0.5,
    )

    # The renewals really hung and timed out; transient failures did not end the holding.
    hung = live.proxy.renewals("hung")
    assert len(hung) >= 2
    assert isinstance(holding.last_error, TransientError)
    assert holding.last_error.code == "timeout"
    assert holding.consecutive_failures == len(hung)
    assert holding.lost is None and not lost
    assert not holding.active and holding.in_jeopardy

    # Every guarded call refuses locally, before any request leaves the process.
    with pytest.raises(LocalJeopardy):
        holding.effect("payment.capture", "invoice-1")
    with pytest.raises(LocalJeopardy):
        holding.headers()
    with pytest.raises(LocalJeopardy), holding.guard():
        pytest.fail("guarded block ran in jeopardy")
    assert live.proxy.requests_to("/api/v1/effects") == []

    # Keep the renewals hung for longer than the ttl: the server lets the lease go, and the
    # SDK keeps refusing all the while.
    for _ in range(400):
        if live.server_view(key)["lease_id"] is None:
            break
        live.renewer.tick()
        live.clock.skip(0.1)
        with pytest.raises(LocalJeopardy):
            holding.ensure()
    assert live.server_view(key)["certainty"] is None
    assert live.clock() - hang_started > TTL_MS / 1000

    # When the network heals, the next renewal learns the authoritative answer.
    live.proxy.hang_renewals = False
    live.clock.skip(0.3)
    live.renewer.tick()
    assert isinstance(holding.lost, LeaseExpired)
    assert [(h, e.code) for h, e in lost] == [(holding, "lease_expired")]
    assert live.renewer.holdings() == []
    with pytest.raises(LeaseExpired):
        holding.effect("payment.capture", "invoice-1")
    holding.release()  # already lost: no release request
    assert live.proxy.requests_to(f"/api/v1/leases/{holding.lease_id}/release") == []


# -- 2. one 503 does not end the lease ---------------------------------------------------------


def test_one_503_on_a_renewal_does_not_end_the_lease(live: Live) -> None:
    client = live.client()
    key = live.admitted("blip")
    lost, on_lost = lost_recorder()
    with client.hold(key, ttl_ms=TTL_MS, on_lost=on_lost) as holding:
        row = lease_row(holding.lease_id)
        deadline_at_grant = holding.deadline
        live.proxy.fail_renewals = 1

        live.clock.skip(1.0)
        live.renewer.tick()
        failed = live.proxy.renewals("503")
        assert len(failed) == 1 and failed[0].body["leases"][0]["lease_id"] == holding.lease_id
        assert isinstance(holding.last_error, TransientError)
        assert holding.last_error.status == 503
        assert holding.consecutive_failures == 1
        assert holding.lost is None and holding.active and not lost
        assert holding.deadline == deadline_at_grant  # the failure neither moves nor cuts it
        assert lease_row(holding.lease_id).renew_count == row.renew_count  # never reached it

        # The retry comes soon (retry_s), goes through to the server and renews.
        live.clock.skip(TIMING.retry_s)
        live.renewer.tick()
        assert [s.action for s in live.proxy.renewals()] == ["503", "forwarded"]
        assert holding.consecutive_failures == 0 and holding.last_error is None
        assert holding.deadline > deadline_at_grant
        assert lease_row(holding.lease_id).renew_count == row.renew_count + 1
        view = live.server_view(key)
        assert view["lease_id"] == holding.lease_id and view["certainty"] == "active"
        assert view["expires_in_ms"] > TTL_MS - 1000

        # Guarded calls work: the server authorizes an effect under this epoch.
        assert holding.active
        decision = holding.effect("payment.capture", "invoice-2")
        assert decision.authorized and decision.fencing_token
        headers = holding.headers(decision)
        assert headers["X-Lease-Epoch"] == str(holding.epoch)
        assert headers["X-Fencing-Token"] == decision.fencing_token
        assert holding.checkpoint({"step": 1}) >= 1
    assert not lost
    # Leaving the block released the lease on the server.
    assert live.server_view(key)["lease_id"] is None
    assert lease_row(holding.lease_id).state == "released"


# -- 3. lease_revoked stops it at once ---------------------------------------------------------


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


def test_lease_revoked_on_renew_ends_the_holding_at_once(live: Live, agent) -> None:  # type: ignore[no-untyped-def]
    client = live.client()
    key = live.admitted("revoke")
    lost, on_lost = lost_recorder()
    successor, _ = agent("successor")
    approver = an_approver()
    with client.hold(key, ttl_ms=TTL_MS, on_lost=on_lost) as holding:
        old_epoch = holding.epoch
        new_epoch = take_over(key, holding.lease_id, successor, approver)
        assert new_epoch == old_epoch + 1
        assert live.server_view(key)["holder"] == "successor"

        live.clock.skip(1.0)
        live.renewer.tick()
        assert len(live.proxy.renewals("forwarded")) == 1

        # Lost on the first answer: no retry, no waiting for the local deadline.
        assert isinstance(holding.lost, LeaseRevoked)
        assert holding.lost.code == "lease_revoked"
        assert [(h, e.code) for h, e in lost] == [(holding, "lease_revoked")]
        assert holding.remaining_s() > 0.3  # long before the local deadline
        assert not holding.active
        assert live.renewer.holdings() == []
        with pytest.raises(LeaseRevoked):
            holding.ensure()
        with pytest.raises(LeaseRevoked):
            holding.effect("payment.capture", "invoice-3")
        with pytest.raises(LeaseRevoked):
            holding.headers()
        with pytest.raises(LeaseRevoked):
            holding.checkpoint({"step": 2})
        assert live.proxy.requests_to("/api/v1/effects") == []

        # An effect proposed with the old epoch anyway is refused by the server.
        with pytest.raises(StaleEpoch) as refused:
            client.propose_effect(holding.lease_id, old_epoch, "payment.capture", "invoice-3")
        assert refused.value.your_epoch == old_epoch
        assert refused.value.current_epoch == new_epoch

        # The renewer forgot the lease: later ticks send nothing.
        live.clock.skip(1.0)
        assert live.renewer.tick() is None
        assert len(live.proxy.renewals()) == 1
    # Leaving the block sends no release for a lost lease; the successor keeps the work.
    assert live.proxy.requests_to(f"/api/v1/leases/{holding.lease_id}/release") == []
    assert live.server_view(key)["holder"] == "successor"
    assert len(lost) == 1


def test_after_a_takeover_an_old_epoch_effect_is_refused_before_any_renewal(
    live: Live,
    agent,  # type: ignore[no-untyped-def]
) -> None:
    client = live.client()
    key = live.admitted("takeover")
    lost, on_lost = lost_recorder()
    successor, _ = agent("successor")
    approver = an_approver()
    with client.hold(key, ttl_ms=TTL_MS, on_lost=on_lost) as holding:
        take_over(key, holding.lease_id, successor, approver)
        assert holding.active  # nothing has told this process yet

        with pytest.raises(StaleEpoch):
            holding.effect("payment.capture", "invoice-4")
        assert isinstance(holding.lost, StaleEpoch)
        assert [(h, e.code) for h, e in lost] == [(holding, "stale_epoch")]
        with pytest.raises(StaleEpoch):
            holding.headers()
        assert live.renewer.holdings() == []
    assert live.proxy.renewals() == []


# -- 4. one renewer per process, one batch request per tick ---------------------------------


def test_two_holdings_in_one_process_renew_in_one_request_per_tick(live: Live) -> None:
    client = live.client()
    keys = [live.admitted("batch") for _ in range(2)]
    first = client.hold(keys[0], ttl_ms=TTL_MS)
    second = client.hold(keys[1], ttl_ms=TTL_MS)
    with first, second:
        lease_ids = {first.lease_id, second.lease_id}
        assert {h.lease_id for h in live.renewer.holdings()} == lease_ids
        counts = {lid: lease_row(lid).renew_count for lid in lease_ids}
        for tick in range(1, 4):
            live.clock.skip(1.0)
            live.renewer.tick()
            renewals = live.proxy.renewals()
            assert len(renewals) == tick
            assert all(s.path == "/api/v1/leases/renew" for s in renewals)
            assert {item["lease_id"] for item in renewals[-1].body["leases"]} == lease_ids
            assert live.renewer.requests == tick
        assert {lid: lease_row(lid).renew_count for lid in lease_ids} == {
            lid: n + 3 for lid, n in counts.items()
        }
        assert first.active and second.active
        assert first.consecutive_failures == second.consecutive_failures == 0
        for key, holding in zip(keys, (first, second), strict=True):
            view = live.server_view(key)
            assert view["lease_id"] == holding.lease_id and view["certainty"] == "active"

    # Clients built without an explicit renewer share the one process-wide renewer.
    plain = [Client(live.proxy.url, live.token, timing=TIMING) for _ in range(2)]
    live.clients.extend(plain)
    assert plain[0].renewer is plain[1].renewer is process_renewer()
