"""A simulated fleet of agents driving Leaseboard over real HTTP with the agent SDK.

Behaviours: steady workers (checkpoints, payments through the sandbox, refunds awaiting
approval), a slow renewer that falls into jeopardy and recovers, a holder that pauses past
expiry and then sends a stale payment the sandbox refuses, and crashes that leave effects
`unknown` or without an outcome. Every wait watches `stop`, so SIGTERM ends it promptly.
"""

from __future__ import annotations

import functools
import itertools
import logging
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import httpx

from leaseboard_client import (
    ApprovalRequired,
    Client,
    ClientTiming,
    Holding,
    InJeopardy,
    LeaseError,
    LocalJeopardy,
    LockDelay,
    WorkLeased,
)

log = logging.getLogger("leaseboard.simulate")

LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
# Request timeout ≤ half of the shortest demo renew interval (ttl 6 s → 2 s).
TIMING = ClientTiming(request_timeout_s=1.0, renew_interval_s=3.0, safety_margin_s=1.0)
# An agent whose effect waits for an approver holds on (renewing) this long, as a real one
# would, so the demo's approvals stay decidable instead of lapsing with their lease.
APPROVAL_WAIT_S = 300.0


def check_loopback(base_url: str) -> str:
    parsed = urlparse(base_url)
    if parsed.scheme != "http" or parsed.hostname not in LOOPBACK_HOSTS:
        raise ValueError(f"the simulator only talks to a loopback http:// server, not {base_url}")
    return base_url.rstrip("/")


@dataclass
class Fleet:
    base_url: str
    tokens: dict[str, str]  # agent name -> bearer token
    stop: threading.Event = field(default_factory=threading.Event)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    stats: Counter = field(default_factory=Counter)
    say: Callable[[str], None] = print
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)
    _clients: list[Client] = field(default_factory=list)

    # -- plumbing --------------------------------------------------------------------------

    def count(self, what: str) -> None:
        with self._lock:
            self.stats[what] += 1

    def client(self, name: str) -> Client:
        c = Client(self.base_url, self.tokens[name], timing=TIMING)
        self._clients.append(c)
        return c

    def key(self, agent: str, n: int) -> str:
        return f"demo-{self.run_id}-{agent.removeprefix('demo-agent-')}-{n}"

    def pay(self, sandbox: httpx.Client, headers: dict[str, str], amount: int, key: str) -> int:
        """POST a payment to the sandbox recipient; returns the HTTP status."""
        response = sandbox.post(
            "/sandbox/payments",
            headers=headers,
            json={
                "amount_cents": amount,
                "currency": "EUR",
                "payee": "acme",
                "idempotency_key": key,
            },
        )
        self.count(f"sandbox_{response.status_code}")
        return response.status_code

    def charge(self, h: Holding, sandbox: httpx.Client, kind: str = "payment.charge") -> str:
        """Propose, pay through the sandbox, report the outcome. Returns what happened."""
        amount = random.randint(100, 50_000)
        try:
            with h.effect(
                kind,
                "sandbox:acme",
                payload={"amount_cents": amount},
                approval_wait_s=APPROVAL_WAIT_S,
            ) as fx:
                status = self.pay(sandbox, fx.headers(), amount, fx.idempotency_key or "")
                if status not in (200, 201):
                    fx.set_outcome("failed", f"sandbox answered {status}")
        except ApprovalRequired:
            self.count("pending_approval")
            return "pending_approval"
        self.count(f"effect_{fx.outcome}")
        return fx.outcome or "unknown"

    def wait(self, seconds: float) -> bool:
        """Sleep unless stopped; True if we should keep going."""
        return not self.stop.wait(seconds)

    def admit_and_hold(self, c: Client, key: str, queue: str, **kw: Any) -> Holding:
        c.admit(key, queue, title=f"simulated {queue} job")
        return c.hold(key, **kw)

    def jobs(self, name: str) -> Iterator[tuple[Client, httpx.Client, int]]:
        """Agent `name`'s client, the sandbox's HTTP client and a job number, until stopped."""
        c = self.client(name)
        with httpx.Client(base_url=self.base_url, timeout=2.0) as sandbox:
            for n in itertools.count(1):
                if self.stop.is_set():
                    return
                yield c, sandbox, n

    # -- behaviours ------------------------------------------------------------------------

    def steady(self, name: str, queue: str) -> None:
        for c, sandbox, n in self.jobs(name):
            try:
                with self.admit_and_hold(c, self.key(name, n), queue) as h:
                    self.count("leases")
                    for step in range(random.randint(3, 6)):
                        kind = "payment.refund" if random.random() < 0.15 else "payment.charge"
                        if queue != "payments":
                            kind = "ledger.post"
                        if kind == "ledger.post":
                            with h.effect(kind, "ledger:main", payload={"step": step}):
                                pass  # the simulated ledger posts nothing for real
                            self.count("effect_applied")
                        else:
                            self.charge(h, sandbox, kind)
                        h.checkpoint({"step": step, "at": time.time()})
                        self.count("checkpoints")
                        if not self.wait(random.uniform(0.8, 2.0)):
                            return
            except LeaseError as exc:
                self.count(f"steady_{exc.code or type(exc).__name__}")
                if not self.wait(1.0):
                    return

    def slow(self, name: str, queue: str = "payments") -> None:
        """Renews by hand, sometimes too late: server-side jeopardy, refused effect, recovery."""
        for c, sandbox, n in self.jobs(name):
            try:
                with self.admit_and_hold(c, self.key(name, n), queue, renew=False) as h:
                    self.count("leases")
                    gap = h.ttl_ms / 1000
                    for rnd in range(6):
                        late = rnd % 3 == 2
                        # Late: past jeopardy_after (2/3 ttl), before the ttl runs out.
                        if not self.wait(gap * (0.8 if late else 0.3)):
                            return
                        if late:
                            try:
                                h.propose("payment.charge", "sandbox:acme")
                            except (InJeopardy, LocalJeopardy) as exc:
                                self.count("refused_in_jeopardy")
                                log.info("%s: effect refused in jeopardy (%s)", name, exc.code)
                        h.renew_now()
                        self.count("recovered" if late else "renewals")
                        if not late:
                            self.charge(h, sandbox)
            except LeaseError as exc:
                self.count(f"slow_{exc.code or type(exc).__name__}")
                if not self.wait(1.0):
                    return

    def pause(self, zombie_name: str, successor_name: str, queue: str = "payments") -> None:
        """A holder stalls past expiry; a successor takes over; the stale payment (a replay
        of the zombie's effect token) is refused."""
        zombie, successor = self.client(zombie_name), self.client(successor_name)
        with httpx.Client(base_url=self.base_url, timeout=2.0) as sandbox:
            for n in itertools.count(1):
                if not self.wait(2.0):
                    return
                key = self.key(zombie_name, n)
                try:
                    h = self.admit_and_hold(zombie, key, queue, renew=False)
                    self.count("leases")
                    decision = h.propose("payment.charge", "sandbox:acme", payload={"n": n})
                    stale = h.headers(decision)  # the effect's token, kept over the "GC pause"
                    paid = self.pay(sandbox, stale, 999, f"paid-{key}") in (200, 201)
                    h.report_outcome(decision.effect_id, "applied" if paid else "failed")
                    deadline = time.monotonic() + h.ttl_ms / 1000 * 3
                    if not self.wait(h.ttl_ms / 1000 * 0.9):
                        return
                    # The pause: no renewals. A successor acquires once the lease has expired
                    # and the skew allowance has passed (lock_delay until then).
                    while True:
                        try:
                            with successor.hold(key) as s:
                                self.count("leases")
                                self.charge(s, sandbox)  # raises the sandbox's mark
                            break
                        except (WorkLeased, LockDelay):
                            if time.monotonic() > deadline or not self.wait(0.5):
                                return
                    # Refused by epoch (409 stale_epoch) or by time (403 expired): the token
                    # died with the standing it proved.
                    status = self.pay(sandbox, stale, 999, f"stale-{key}")
                    self.count("stale_refused" if status in (403, 409) else "stale_NOT_refused")
                    log.info("%s: stale payment after pause -> %s", zombie_name, status)
                    try:
                        h.release()
                    except LeaseError:
                        pass  # expired long ago: the server says so, nothing to release
                except LeaseError as exc:
                    self.count(f"pause_{exc.code or type(exc).__name__}")

    def crash(self, name: str, queue: str = "payments") -> None:
        """Dies mid-effect: the lease expires with an effect `unknown` or without outcome."""
        c = self.client(name)
        with httpx.Client(base_url=self.base_url, timeout=2.0) as sandbox:
            for n in itertools.count(1):
                if not self.wait(random.uniform(3.0, 6.0)):
                    return
                try:
                    h = self.admit_and_hold(c, self.key(name, n), queue)
                    self.count("leases")
                    h.checkpoint({"step": 0})
                    decision = h.propose("payment.charge", "sandbox:acme", payload={"n": n})
                    self.pay(sandbox, h.headers(decision), 1234, decision.idempotency_key)
                    if n % 2:
                        h.report_outcome(decision.effect_id, "unknown", "provider timed out")
                    # "Crash": stop renewing without releasing; the lease runs out on its own.
                    c.renewer.unregister(h)
                    self.count("crashes")
                except LeaseError as exc:
                    self.count(f"crash_{exc.code or type(exc).__name__}")
                if not self.wait(random.uniform(8.0, 14.0)):
                    return

    # -- running ---------------------------------------------------------------------------

    def plan(self) -> list[tuple[str, Callable[[], None]]]:
        names = list(self.tokens)
        if len(names) < 5:
            raise ValueError("the fleet needs at least 5 agents (run demo_setup --agents 5)")
        steady = names[5:]
        jobs: list[tuple[str, Callable[[], None]]] = [
            (names[0], lambda: self.pause(names[0], names[1])),
            (names[2], lambda: self.slow(names[2])),
            (names[3], lambda: self.crash(names[3])),
            (names[4], lambda: self.steady(names[4], "payments")),
        ]
        for i, name in enumerate(steady):
            queue = "ledger-sync" if i % 2 == 0 else "payments"
            jobs.append((name, functools.partial(self.steady, name, queue)))
        return jobs

    def start(self) -> None:
        for name, job in self.plan():
            thread = threading.Thread(target=self._guarded(name, job), name=name, daemon=True)
            self._threads.append(thread)
            thread.start()

    def _guarded(self, name: str, job: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            while not self.stop.is_set():
                try:
                    job()
                    return
                except Exception as exc:  # a simulated agent never takes the fleet down
                    self.count("agent_errors")
                    log.warning("%s failed (%s); restarting in 2 s", name, exc)
                    self.stop.wait(2.0)

        return run

    def shutdown(self, timeout_s: float = 8.0) -> None:
        self.stop.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.1, deadline - time.monotonic()))
        for c in self._clients:
            c.close()
