"""The sync HTTP client for Leaseboard's v1 agent API (docs/design.md §13).

Requests and answers are built and parsed in leaseboard_client.protocol (shared with the
asyncio client); this module only moves them with httpx and records when each was sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import httpx

from leaseboard_client import protocol
from leaseboard_client.errors import (
    CommitUnknown,
    LeaseError,
    LockDelay,
    TransientError,
    WorkLeased,
    unknown_pause,
)
from leaseboard_client.holding import Holding, Renewer, process_renewer
from leaseboard_client.protocol import (
    Admission,
    Call,
    EffectDecision,
    Grant,
    Renewal,
    RenewResult,
)
from leaseboard_client.timing import ClientTiming, TimingError
from leaseboard_client.version import USER_AGENT

__all__ = ["Admission", "Client", "EffectDecision", "Grant", "RenewResult", "Renewal"]


def unbind(response: httpx.Response) -> httpx.Response:
    """`response`, read and closed, taken out of httpx's reference cycle, so that it and the
    bodies it holds (a 1,000-lease batch renew: ~150 kB answer, ~60 kB request) are freed
    when the call returns instead of waiting for Python's cyclic garbage collector.

    httpx 0.28 wraps every response's stream in a `BoundSyncStream`/`BoundAsyncStream`
    that points back at the response (to set `elapsed` on close). Such a pair outlives the
    young generations whenever a collection runs while it is alive (parsing a batch renew
    answer allocates thousands of objects), and the full collections that would free it are
    triggered by object counts, not bytes: in bench/soak.py an agent process renewing a
    thousand leases grew ~0.9 MB a minute of dead responses (bench/soak_memprobe.py).
    """
    if response.is_closed:  # read to the end: the stream has nothing left to give
        response.stream = httpx.ByteStream(b"")
    return response


def lock_delay_wait(error: LockDelay, *, waited_s: float, wait_s: float) -> float | None:
    """How long to wait before acquiring again, or None once the budget `wait_s` is spent."""
    retry = error.retry_after_s
    if retry is None or waited_s + retry > wait_s:
        return None
    return retry


# What an acquire's answer may have been lost to: its commit was cut in flight
# (CommitUnknown), the request timed out, the connection dropped, or the server failed
# after the request arrived (500). A plain 503 said "nothing was changed".
ANSWER_LOST_CODES = frozenset({"timeout", "network", "internal_error"})


def answer_lost(exc: LeaseError) -> bool:
    """Did this acquire perhaps grant a lease whose answer never arrived?"""
    return isinstance(exc, CommitUnknown) or (
        isinstance(exc, TransientError) and exc.code in ANSWER_LOST_CODES
    )


def own_lost_grant(exc: WorkLeased, unsure: LeaseError | None, released: bool) -> tuple[str, int]:
    """After an acquire whose answer was lost (`answer_lost`), `work_leased` naming this
    agent's own lease is that acquire's grant, whose token never arrived: (lease_id, epoch)
    to release (nothing was done under it). Anything else re-raises `exc`."""
    if unsure is None or released or exc.lease_id is None or exc.current_epoch is None:
        raise exc
    return exc.lease_id, int(exc.current_epoch)


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
                "User-Agent": USER_AGENT,
                **protocol.HEADERS,
            },
            timeout=self.timing.timeout_s,
            transport=transport,
        )

    @property
    def renewer(self) -> Renewer:
        if self._renewer is None:
            self._renewer = process_renewer()
        return self._renewer

    # -- transport -------------------------------------------------------------------------

    def _call(self, call: Call, timeout_s: float | None = None) -> tuple[dict[str, Any], float]:
        """The answer's JSON object and the monotonic time the request was sent; `timeout_s`
        bounds this request instead of the client's own timeout (a lease's renewal)."""
        sent_at = self.clock()
        timeout = self.timing.timeout_s if timeout_s is None else timeout_s
        try:
            response = unbind(
                self._http.request(call.method, call.path, json=call.body, timeout=timeout)
            )
        except httpx.TimeoutException as exc:
            raise TransientError(f"{call.method} {call.path} timed out", code="timeout") from exc
        except httpx.TransportError as exc:
            raise TransientError(f"{call.method} {call.path}: {exc}", code="network") from exc
        return protocol.answer(call, response.status_code, response.content), sent_at

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
        data, _ = self._call(protocol.admit(key, queue, title=title, scope=scope, policy=policy))
        return protocol.admission(data)

    def work_item(self, key: str) -> dict[str, Any]:
        return self._call(protocol.work_item(key))[0]

    def acquire(self, work_key: str, ttl_ms: int | None = None) -> Grant:
        data, sent_at = self._call(protocol.acquire(work_key, ttl_ms))
        return protocol.grant(data, work_key=work_key, sent_at=sent_at)

    def renew(self, lease_id: str, epoch: int, *, timeout_s: float | None = None) -> Renewal:
        data, sent_at = self._call(protocol.renew(lease_id, epoch), timeout_s)
        return protocol.renewal(data, lease_id=lease_id, epoch=epoch, sent_at=sent_at)

    def renew_many(
        self,
        leases: Iterable[tuple[str, int] | Mapping[str, Any]],
        *,
        timeout_s: float | None = None,
    ) -> list[RenewResult]:
        """Batch renew (POST /api/v1/leases/renew), chunked at the server's limit; each
        request bounded by `timeout_s` (the renewer passes its batch's shortest).

        A failed item is a result with `ok=False` and a typed `error`; a failed request
        raises (TransientError for network/5xx).
        """
        results: list[RenewResult] = []
        for call in protocol.renew_batches(leases):
            data, sent_at = self._call(call, timeout_s)
            results.extend(protocol.renew_results(data, sent_at=sent_at))
        return results

    def release(self, lease_id: str, epoch: int) -> None:
        self._call(protocol.release(lease_id, epoch))

    def checkpoint(self, lease_id: str, epoch: int, data: Any) -> int:
        return protocol.checkpoint_seq(self._call(protocol.checkpoint(lease_id, epoch, data))[0])

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
        call, key = protocol.propose(
            lease_id, epoch, kind, target, idempotency_key=idempotency_key, payload=payload
        )
        return protocol.decision(self._call(call)[0], idempotency_key=key)

    def report_outcome(self, effect_id: str, outcome: str, detail: str | None = None) -> None:
        self._call(protocol.outcome(effect_id, outcome, detail))

    def fencing_keys(self) -> dict[str, Any]:
        return self._call(protocol.fencing_keys())[0]

    # -- holding ---------------------------------------------------------------------------

    def hold(
        self,
        work_key: str,
        *,
        ttl_ms: int | None = None,
        on_lost: Callable[[Holding, LeaseError], object] | None = None,
        renew: bool = True,
        wait_s: float = 0.0,
    ) -> Holding:
        """Acquire and keep renewing in the process-wide renewer; usable as a context manager.

        `wait_s`: how long to wait out a lock delay (the server says when: `retry_after_ms`)
        before raising LockDelay. The lease's timing is checked against this client's before
        work starts; a lease we could not keep alive is released at once and TimingError
        raised.
        """
        if ttl_ms is not None:  # the server derives renew_after from a grant's ttl (ttl/3)
            self.timing.validate_lease(ttl_ms=ttl_ms, renew_after_ms=ttl_ms // 3)
        waited = 0.0
        # An acquire whose answer was lost (its commit cut in flight, a timeout, a dropped
        # connection) may have granted a lease whose token never arrived: never act on it;
        # ask again, and release it if the answer names it (docs/design.md §14). Without
        # this, an agent timing out against an overloaded server left a lease of its own
        # in the way of every retry until the ttl ran out.
        unsure: LeaseError | None = None
        released = False
        while True:
            try:
                grant = self.acquire(work_key, ttl_ms=ttl_ms)
                break
            except LockDelay as exc:
                pause = lock_delay_wait(exc, waited_s=waited, wait_s=wait_s)
                if pause is None:
                    raise
                time.sleep(pause)
                waited += pause
            except WorkLeased as exc:
                self.release(*own_lost_grant(exc, unsure, released))
                released = True
            except TransientError as exc:
                if unsure is not None:
                    raise unsure from exc  # still unknown: say so, not "unavailable"
                if not answer_lost(exc):
                    raise
                unsure = exc
                time.sleep(unknown_pause(exc))
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
