"""The SDK fleet and the recipient of `make faults` (bench/faults.py), in threads of the
bench's own process: every HTTP answer an agent gets is recorded at the transport (status,
media type, time), every write it was told failed is remembered so the run can look for
it in the database afterwards, and the recipient's webhook counts what it is sent.

Each agent loops: admit a fresh work item, hold it (the SDK's renewer keeps it), propose
two effects and report them applied, keep it a while (a third of the agents for 30 s, long
enough for an outage to put the holding in local jeopardy), release. Every sixth lease is
abandoned instead (held with renew=False and forgotten), for the sweep to expire and alert.
A failed step moves on to a fresh work item: a write is never retried, so each one the
client was told failed can be checked on its own.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from leaseboard_client import Client, ClientTiming, LeaseError, LocalJeopardy


@dataclass
class Record:
    """What the fleet saw, shared by its threads (one lock)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    statuses: Counter[str] = field(default_factory=Counter)  # "503 problem+json", "timeout"
    by_path: Counter[str] = field(default_factory=Counter)
    failed: list[tuple[str, str, str]] = field(default_factory=list)  # (step, key, code)
    grants: list[str] = field(default_factory=list)
    effects: list[str] = field(default_factory=list)
    abandoned: list[str] = field(default_factory=list)
    jeopardy_entered: int = 0
    jeopardy_resumed: int = 0
    lost_to_outage: Counter[str] = field(default_factory=Counter)
    slowest_s: float = 0.0
    phase: str = "steady"  # set by the run as it injects each fault
    by_phase: dict[str, Counter[str]] = field(default_factory=dict)
    unavailable_s: list[float] = field(default_factory=list)  # how long each 503 took

    def answer(self, request: httpx.Request, what: str, took: float) -> None:
        kind = request.url.path.split("/api/v1/", 1)[-1].split("/")[0]
        with self.lock:
            self.statuses[what] += 1
            self.by_path[f"{request.method} {kind} {what}"] += 1
            self.by_phase.setdefault(self.phase, Counter())[what] += 1
            self.slowest_s = max(self.slowest_s, took)
            if what.startswith("503"):
                self.unavailable_s.append(took)

    def add(self, name: str, value: Any) -> None:
        with self.lock:
            getattr(self, name).append(value)


class RecordingTransport(httpx.HTTPTransport):
    def __init__(self, record: Record) -> None:
        super().__init__()
        self.record = record

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        started = time.monotonic()
        try:
            response = super().handle_request(request)
        except httpx.TimeoutException:
            self.record.answer(request, "client timeout", time.monotonic() - started)
            raise
        except httpx.TransportError as exc:
            what = f"network error ({type(exc).__name__})"
            self.record.answer(request, what, time.monotonic() - started)
            raise
        media = response.headers.get("content-type", "").split(";")[0] or "none"
        self.record.answer(request, f"{response.status_code} {media}", time.monotonic() - started)
        return response


def _code(exc: LeaseError) -> str:
    """`503 unavailable deadline`, `timeout`, `409 work_leased`: what the client was told."""
    reason = exc.problem.get("reason") if exc.code == "unavailable" else None
    told = exc.code if exc.status is None else f"{exc.status} {exc.code}"
    return f"{told} {reason}" if reason else told


def agent(index: int, base_url: str, token: str, record: Record, stop: threading.Event) -> None:
    rng = random.Random(index)
    # A third hold for 30 s with a wider safety margin (local deadline 10.85 s after the last
    # acknowledged renewal instead of 13.85): an outage puts them in local jeopardy while
    # the server's lease (15 s) still lives, so they can resume.
    long = index % 3 == 0
    timing = ClientTiming(safety_margin_s=4.0) if long else ClientTiming()
    client = Client(base_url, token, transport=RecordingTransport(record), timing=timing)
    n = 0
    while not stop.is_set():
        n += 1
        key = f"a{index}-{n}"
        try:
            client.admit(key)
        except LeaseError as exc:
            record.add("failed", ("admit", key, _code(exc)))
            stop.wait(0.2)
            continue
        abandon = n % 6 == 0
        try:
            holding = client.hold(key, renew=not abandon)
        except LeaseError as exc:
            record.add("failed", ("acquire", key, _code(exc)))
            stop.wait(0.2)
            continue
        record.add("grants", holding.lease_id)
        if abandon:
            record.add("abandoned", holding.lease_id)
            continue
        for k in range(2):
            ikey = f"{key}-fx{k}"
            try:
                decision = holding.propose("refund", key, idempotency_key=ikey, payload={"k": k})
            except LocalJeopardy:
                continue
            except LeaseError as exc:
                record.add("failed", ("effect", ikey, _code(exc)))
                continue
            record.add("effects", decision.effect_id)
            try:
                holding.report_outcome(decision.effect_id, "applied")
            except LeaseError as exc:
                record.add("failed", ("outcome", decision.effect_id, _code(exc)))
        keep_s = 30.0 if long else rng.uniform(1.0, 3.0)
        _keep(holding, keep_s, record, stop)
        if holding.lost is not None:
            with record.lock:
                record.lost_to_outage[holding.lost.code] += 1
            continue
        try:
            holding.release()
        except LeaseError as exc:
            record.add("failed", ("release", holding.lease_id, _code(exc)))
    client.close()


def _keep(holding: Any, seconds: float, record: Record, stop: threading.Event) -> None:
    """Hold for `seconds`, noting a fall into local jeopardy and a recovery from it."""
    until = time.monotonic() + seconds
    was = False
    while time.monotonic() < until and not stop.is_set() and holding.lost is None:
        now = holding.in_jeopardy
        if now and not was:
            with record.lock:
                record.jeopardy_entered += 1
        if was and not now:
            with record.lock:
                record.jeopardy_resumed += 1
        was = now
        stop.wait(0.2)
    if was and holding.lost is None:
        # Still in jeopardy at the end: give the renewer a last chance to resume it.
        for _ in range(50):
            if not holding.in_jeopardy or holding.lost is not None:
                break
            time.sleep(0.2)
        if not holding.in_jeopardy and holding.lost is None:
            with record.lock:
                record.jeopardy_resumed += 1


class Hook:
    """The recipient's and the operators' webhook: epoch notices and alert deliveries."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.notices: set[int] = set()  # EpochNotice ids
        self.deliveries: set[str] = set()  # NotificationDelivery ids
        self.posts = 0
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with hook.lock:
                    hook.posts += 1
                    for notice in body.get("notices", []):
                        hook.notices.add(int(notice["notice_id"]))
                    if self.headers.get("X-Leaseboard-Delivery"):
                        hook.deliveries.add(self.headers["X-Leaseboard-Delivery"])
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
