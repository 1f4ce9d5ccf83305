"""The asyncio API, beside the sync one: `AsyncClient`, `AsyncHolding`, and one renewer task
per event loop that batches every holding of that loop into one renew request per tick.

    async with AsyncClient(url, token) as client:
        async with client.hold("invoice-7") as holding:
            async with holding.effect("payment.refund", target="invoice-7") as fx:
                await payments.post("/refunds", headers=fx.headers(), json=...)

Local jeopardy and self-fencing are the sync SDK's own code (leaseboard_client.standing).
Cancellation-safe: a holding leaves its renewer before anything is awaited on the way out,
so a cancelled task never leaves a lease being renewed; its release (and an effect's
outcome report) is shielded from a second cancellation, and a lease whose release never
went out simply expires. The renewer task ends when its loop holds nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping
from typing import Any, TypeVar

import httpx

from leaseboard_client import protocol
from leaseboard_client.api import answer_lost, lock_delay_wait, own_lost_grant, unbind
from leaseboard_client.effects import APPROVAL_POLL_S, REPORT_BACKOFF_S, Effect
from leaseboard_client.errors import (
    CommitUnknown,
    LeaseError,
    LockDelay,
    TransientError,
    WorkLeased,
    unknown_pause,
)
from leaseboard_client.protocol import (
    Admission,
    Call,
    EffectDecision,
    Grant,
    Renewal,
    RenewResult,
    new_idempotency_key,
)
from leaseboard_client.standing import Standing, apply_failure, apply_results, due, next_due
from leaseboard_client.timing import ClientTiming, TimingError
from leaseboard_client.version import USER_AGENT

log = logging.getLogger("leaseboard_client")

T = TypeVar("T")

# Chunks of one batch renew (the server takes protocol.MAX_BATCH leases a request) in flight
# at once: a renewer with 10,000 leases sends ten requests, four at a time.
RENEW_CHUNKS_IN_FLIGHT = 4


async def finish(work: Awaitable[T]) -> T:
    """Await `work` to its end even if the caller is cancelled meanwhile: a release or an
    outcome report goes on in the background (bounded by the request timeout), and the
    caller's cancellation still propagates."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.add_done_callback(_log_failure)
        raise


def _log_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("shielded call failed after its caller was cancelled: %s", task.exception())


class AsyncRenewer:
    """Renews every `AsyncHolding` of one event loop, one batch request per client per tick.

    `await tick()` does one round and returns when it wants to run next, so tests can
    drive it with a fake clock and no task (`start_task=False`).
    """

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, start_task: bool = True
    ) -> None:
        self.clock = clock
        self.start_task = start_task
        self.requests = 0  # batch requests sent, for tests and metrics
        self._holdings: dict[int, AsyncHolding] = {}
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None

    def register(self, holding: AsyncHolding) -> None:
        self._holdings[id(holding)] = holding
        if self.start_task:
            if self._task is None or self._task.done():
                self._wake = asyncio.Event()
                self._task = asyncio.get_running_loop().create_task(
                    self._run(), name="leaseboard-renewer"
                )
            self._poke()

    def unregister(self, holding: AsyncHolding) -> None:
        self._holdings.pop(id(holding), None)
        if not self._holdings:
            self._poke()  # nothing left: let the task end now, not at its next due time

    def forget_client(self, client: AsyncClient) -> None:
        for key in [k for k, h in self._holdings.items() if h.client is client]:
            del self._holdings[key]
        self._poke()

    def holdings(self) -> list[AsyncHolding]:
        return list(self._holdings.values())

    @property
    def running(self) -> bool:
        """Whether this loop has a renewer task right now (none once nothing is held)."""
        return self._task is not None and not self._task.done()

    async def tick(self) -> float | None:
        """Renew what is due (coalescing what is nearly due); return the next due time."""
        by_client: dict[int, list[AsyncHolding]] = {}
        for h in due(self.holdings(), self.clock()):
            by_client.setdefault(id(h.client), []).append(h)
        await asyncio.gather(*(self._renew_group(group) for group in by_client.values()))
        return next_due(self.holdings())

    async def _renew_group(self, group: list[AsyncHolding]) -> None:
        client = group[0].client
        self.requests += 1
        try:
            results = await client.renew_many(
                [(h.lease_id, h.epoch) for h in group],
                timeout_s=min(h.request_timeout_s for h in group),
            )
        except LeaseError as exc:
            apply_failure(group, exc, self.clock())
            return
        apply_results(group, results, self.clock())

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _run(self) -> None:
        wake = self._wake
        assert wake is not None
        while self._holdings:
            try:
                next_at = await self.tick()
            except Exception:  # the renewer must outlive one bad round
                log.exception("renewer round failed")
                next_at = self.clock() + 1.0
            if not self._holdings or next_at is None:
                continue
            delay = next_at - self.clock()
            if delay > 0:
                wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), delay)

    async def aclose(self) -> None:
        """Stop the task (holdings stay registered; a later register starts it again)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


_loop_renewers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncRenewer] = (
    weakref.WeakKeyDictionary()
)


def loop_renewer() -> AsyncRenewer:
    """The renewer of the running event loop (one per loop, made on first use)."""
    loop = asyncio.get_running_loop()
    renewer = _loop_renewers.get(loop)
    if renewer is None:
        renewer = _loop_renewers[loop] = AsyncRenewer()
    return renewer


class AsyncHolding(Standing):
    """Standing on one work item under one epoch, held by an `AsyncClient`.

    Guarded calls (`effect`, `propose`, `guard`, `headers`) raise `LocalJeopardy` once the
    local deadline passes, and the authoritative error once the server says the lease is gone.
    """

    def __init__(
        self,
        client: AsyncClient,
        grant: Grant,
        *,
        renewer: AsyncRenewer | None,
        on_lost: Callable[[AsyncHolding, LeaseError], object] | None = None,
    ) -> None:
        super().__init__(grant, timing=client.timing, clock=client.clock, on_lost=on_lost)
        self.client = client
        self.renewer = renewer

    @contextlib.contextmanager
    def guard(self) -> Generator[AsyncHolding, None, None]:
        """Enter only with standing. Recipients' epoch checks, not this, protect the writes."""
        self.ensure()
        yield self

    def effect(
        self,
        kind: str,
        target: str,
        *,
        idempotency_key: str | None = None,
        payload: Any = None,
        approval_wait_s: float = 0.0,
        approval_poll_s: float = APPROVAL_POLL_S,
    ) -> AsyncEffectScope:
        """`async with holding.effect(kind, target) as fx:` proposes on entry (refused
        without standing), reports the outcome on exit (see leaseboard_client.effects).
        With `approval_wait_s`, a proposal held for an approver is asked again every
        `approval_poll_s` for up to that long while the holding keeps renewing; still
        undecided, it raises ApprovalRequired."""
        return AsyncEffectScope(
            self,
            kind,
            target,
            idempotency_key=idempotency_key,
            payload=payload,
            approval_wait_s=approval_wait_s,
            approval_poll_s=approval_poll_s,
        )

    async def propose(
        self,
        kind: str,
        target: str,
        *,
        idempotency_key: str | None = None,
        payload: Any = None,
    ) -> EffectDecision:
        """Propose an effect (raises LocalJeopardy past the deadline, before any request);
        the caller reports its outcome. `effect()` does both."""
        self.ensure_may_propose()
        key = idempotency_key or new_idempotency_key()
        try:
            return await self.client.propose_effect(
                self.lease_id, self.epoch, kind, target, idempotency_key=key, payload=payload
            )
        except CommitUnknown as exc:
            exc.idempotency_key = key
            self._seen(exc)
            unknown = exc
        except LeaseError as exc:
            self._seen(exc)
            raise
        # As Holding.propose: learn the first answer with the same key, never anew.
        await asyncio.sleep(unknown_pause(unknown))
        self.ensure_may_propose()
        try:
            return await self.client.propose_effect(
                self.lease_id, self.epoch, kind, target, idempotency_key=key, payload=payload
            )
        except TransientError as again:
            self._seen(again)
            raise unknown from again
        except LeaseError as exc:
            self._seen(exc)
            raise

    def headers(self, effect: EffectDecision | None = None) -> dict[str, str]:
        """Headers for an outgoing effect call, with the effect's own token (else the lease
        token, which recipients refuse for effects unless configured to accept it)."""
        return self._headers(effect.fencing_token if effect is not None else None)

    # Checkpoints and outcomes are allowed in jeopardy (docs/design.md §4), so only loss stops them.
    async def checkpoint(self, data: Any) -> int:
        if self._lost is not None:
            raise self._lost
        try:
            return await self.client.checkpoint(self.lease_id, self.epoch, data)
        except LeaseError as exc:
            self._seen(exc)
            raise

    async def report_outcome(self, effect_id: str, outcome: str, detail: str | None = None) -> None:
        await self.client.report_outcome(effect_id, outcome, detail)

    async def renew_now(self) -> None:
        """Renew at once (the loop's renewer does this on its own)."""
        if self._lost is not None:
            raise self._lost
        try:
            renewal = await self.client.renew(
                self.lease_id, self.epoch, timeout_s=self.request_timeout_s
            )
        except LeaseError as exc:
            self._renew_failed(exc, now=self.clock())
            raise
        self._renewed(
            sent_at=renewal.sent_at,
            expires_in_ms=renewal.expires_in_ms,
            fencing_token=renewal.fencing_token,
            certainty=renewal.certainty,
            hold_reason=renewal.hold_reason,
        )

    async def release(self) -> None:
        """Stop renewing at once, then release on the server (idempotent; skipped if lost).
        A cancelled caller still sends the release; its cancellation propagates."""
        if self._mark_released():
            await finish(self.client.release(self.lease_id, self.epoch))

    def _forget(self) -> None:
        if self.renewer is not None:
            self.renewer.unregister(self)

    async def __aenter__(self) -> AsyncHolding:
        return self

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            await self.release()
        except LeaseError as error:
            # The lease will expire on its own; don't mask the body's exception with this one.
            log.warning("release of %s failed: %s", self.lease_id, error)


class AsyncEffectScope(Effect):
    """The async context manager (`AsyncHolding.effect(...)`)."""

    holding: AsyncHolding

    async def __aenter__(self) -> AsyncEffectScope:
        self._proposing()
        until = self.holding.clock() + self.approval_wait_s
        while True:
            sent = self.holding.deadline
            decision = await self.holding.propose(
                self.kind,
                self.target,
                idempotency_key=self.idempotency_key,
                payload=self.payload,
            )
            pause = self._waiting(decision, until, sent)
            if pause is None:
                break
            await asyncio.sleep(pause)
        self._decided(decision)
        return self

    async def __aexit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        outcome, detail = self._final(exc)
        self.outcome, self.detail = outcome, detail  # known even if the report is cut short
        error = await finish(self._report(outcome, detail))
        self._reported(outcome, detail, error)

    async def _report(self, outcome: str, detail: str) -> LeaseError | None:
        assert self.effect_id is not None
        error: LeaseError | None = None
        for wait in (*REPORT_BACKOFF_S, None):
            try:
                await self.holding.client.report_outcome(self.effect_id, outcome, detail or None)
                return None
            except TransientError as failure:
                error = failure
                if wait is not None:
                    await asyncio.sleep(wait)
            except LeaseError as failure:
                return failure
        return error


class HoldContext:
    """What `AsyncClient.hold()` returns: `async with` it, or `await` it for the holding."""

    def __init__(self, client: AsyncClient, work_key: str, options: dict[str, Any]) -> None:
        self._client = client
        self._work_key = work_key
        self._options = options
        self._holding: AsyncHolding | None = None

    def __await__(self) -> Generator[Any, None, AsyncHolding]:
        return self._client._hold(self._work_key, **self._options).__await__()

    async def __aenter__(self) -> AsyncHolding:
        self._holding = await self._client._hold(self._work_key, **self._options)
        return self._holding

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        assert self._holding is not None
        await self._holding.__aexit__(exc_type, exc, tb)


class AsyncClient:
    """One executor's asyncio connection to Leaseboard: base_url + bearer token.

    Use it from one event loop (httpx connections belong to the loop that opened them).
    `transport` accepts any httpx async transport (`httpx.MockTransport`, `ASGITransport`).
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timing: ClientTiming | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
        renewer: AsyncRenewer | None = None,
        limits: httpx.Limits | None = None,
    ) -> None:
        # Validate before any lease exists: a bad timing must not be found mid-holding.
        self.timing = (timing or ClientTiming()).validate()
        self.clock = clock
        self._renewer = renewer
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers={
                "Authorization": f"Bearer {token}",
                "User-Agent": USER_AGENT,
                **protocol.HEADERS,
            },
            timeout=self.timing.timeout_s,
            transport=transport,
            limits=limits or httpx.Limits(max_connections=20),
        )

    @property
    def renewer(self) -> AsyncRenewer:
        """This client's renewer: the one given, else the running loop's."""
        return self._renewer if self._renewer is not None else loop_renewer()

    async def _call(
        self, call: Call, timeout_s: float | None = None
    ) -> tuple[dict[str, Any], float]:
        sent_at = self.clock()
        timeout = self.timing.timeout_s if timeout_s is None else timeout_s
        try:
            response = unbind(
                await self._http.request(call.method, call.path, json=call.body, timeout=timeout)
            )
        except httpx.TimeoutException as exc:
            raise TransientError(f"{call.method} {call.path} timed out", code="timeout") from exc
        except httpx.TransportError as exc:
            raise TransientError(f"{call.method} {call.path}: {exc}", code="network") from exc
        return protocol.answer(call, response.status_code, response.content), sent_at

    # -- API -------------------------------------------------------------------------------

    async def admit(
        self,
        key: str,
        queue: str = "default",
        *,
        title: str | None = None,
        scope: Any = None,
        policy: Mapping[str, Any] | None = None,
    ) -> Admission:
        call = protocol.admit(key, queue, title=title, scope=scope, policy=policy)
        return protocol.admission((await self._call(call))[0])

    async def work_item(self, key: str) -> dict[str, Any]:
        return (await self._call(protocol.work_item(key)))[0]

    async def acquire(self, work_key: str, ttl_ms: int | None = None) -> Grant:
        data, sent_at = await self._call(protocol.acquire(work_key, ttl_ms))
        return protocol.grant(data, work_key=work_key, sent_at=sent_at)

    async def renew(self, lease_id: str, epoch: int, *, timeout_s: float | None = None) -> Renewal:
        data, sent_at = await self._call(protocol.renew(lease_id, epoch), timeout_s)
        return protocol.renewal(data, lease_id=lease_id, epoch=epoch, sent_at=sent_at)

    async def renew_many(
        self,
        leases: Iterable[tuple[str, int] | Mapping[str, Any]],
        *,
        timeout_s: float | None = None,
    ) -> list[RenewResult]:
        """Batch renew, chunked at the server's limit; see `Client.renew_many`. The chunks
        are in flight together, up to RENEW_CHUNKS_IN_FLIGHT at once, each bounded by
        `timeout_s` and each result dated from its own chunk's send time: one after
        another, the last of a renewer's ten chunks (10,000 leases) waited nine answers
        before it was sent. Results keep the leases' order; a failed chunk raises (the
        first in order), as it did in turn."""
        calls = protocol.renew_batches(leases)
        gate = asyncio.Semaphore(RENEW_CHUNKS_IN_FLIGHT)

        async def chunk(call: Call) -> list[RenewResult]:
            async with gate:
                data, sent_at = await self._call(call, timeout_s)
            return protocol.renew_results(data, sent_at=sent_at)

        if len(calls) == 1:
            return await chunk(calls[0])
        answers = await asyncio.gather(*(chunk(c) for c in calls), return_exceptions=True)
        results: list[RenewResult] = []
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
            results.extend(answer)
        return results

    async def release(self, lease_id: str, epoch: int) -> None:
        await self._call(protocol.release(lease_id, epoch))

    async def checkpoint(self, lease_id: str, epoch: int, data: Any) -> int:
        answer, _ = await self._call(protocol.checkpoint(lease_id, epoch, data))
        return protocol.checkpoint_seq(answer)

    async def propose_effect(
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
        return protocol.decision((await self._call(call))[0], idempotency_key=key)

    async def report_outcome(self, effect_id: str, outcome: str, detail: str | None = None) -> None:
        await self._call(protocol.outcome(effect_id, outcome, detail))

    async def fencing_keys(self) -> dict[str, Any]:
        return (await self._call(protocol.fencing_keys()))[0]

    # -- holding ---------------------------------------------------------------------------

    def hold(
        self,
        work_key: str,
        *,
        ttl_ms: int | None = None,
        on_lost: Callable[[AsyncHolding, LeaseError], object] | None = None,
        renew: bool = True,
        wait_s: float = 0.0,
    ) -> HoldContext:
        """`async with client.hold(key) as holding:` acquires, renews in this loop's
        renewer, and releases on the way out (or `holding = await client.hold(key)`).

        `wait_s`: how long to wait out a lock delay (`retry_after_ms`) before raising
        LockDelay. A lease whose timing this client could not keep is released at once and
        TimingError raised.
        """
        return HoldContext(
            self, work_key, {"ttl_ms": ttl_ms, "on_lost": on_lost, "renew": renew, "wait_s": wait_s}
        )

    async def _hold(
        self,
        work_key: str,
        *,
        ttl_ms: int | None,
        on_lost: Callable[[AsyncHolding, LeaseError], object] | None,
        renew: bool,
        wait_s: float,
    ) -> AsyncHolding:
        if ttl_ms is not None:
            # the server derives renew_after from a grant's ttl (ttl/3)
            self.timing.validate_lease(ttl_ms=ttl_ms, renew_after_ms=ttl_ms // 3)
        waited = 0.0
        # As Client.hold: never act on a grant whose answer was lost; ask again.
        unsure: LeaseError | None = None
        released = False
        while True:
            try:
                grant = await self.acquire(work_key, ttl_ms=ttl_ms)
                break
            except LockDelay as exc:
                pause = lock_delay_wait(exc, waited_s=waited, wait_s=wait_s)
                if pause is None:
                    raise
                await asyncio.sleep(pause)
                waited += pause
            except WorkLeased as exc:
                await self.release(*own_lost_grant(exc, unsure, released))
                released = True
            except TransientError as exc:
                if unsure is not None:
                    raise unsure from exc
                if not answer_lost(exc):
                    raise
                unsure = exc
                await asyncio.sleep(unknown_pause(exc))
        try:
            self.timing.validate_lease(ttl_ms=grant.ttl_ms, renew_after_ms=grant.renew_after_ms)
        except TimingError:
            with contextlib.suppress(LeaseError):
                await finish(self.release(grant.lease_id, grant.epoch))
            raise
        # No await from here to registration: a cancellation cannot split the two.
        renewer = self.renewer if renew else None
        holding = AsyncHolding(self, grant, renewer=renewer, on_lost=on_lost)
        if renewer is not None:
            renewer.register(holding)
        return holding

    async def aclose(self) -> None:
        if self._renewer is not None:
            self._renewer.forget_client(self)
        else:
            with contextlib.suppress(RuntimeError):
                loop_renewer().forget_client(self)
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
