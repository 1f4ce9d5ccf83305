"""A lease held by the sync client (`Holding`) and the one-per-process background
`Renewer` thread that keeps them.

The renewer batches every due lease of a client into one POST /api/v1/leases/renew, so a
process holding a hundred leases sends about one request per renew interval. What is due
and what an answer means are decided in leaseboard_client.standing, for asyncio too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from leaseboard_client.effects import APPROVAL_POLL_S, EffectScope
from leaseboard_client.errors import CommitUnknown, LeaseError, TransientError, unknown_pause
from leaseboard_client.protocol import EffectDecision, Grant, new_idempotency_key
from leaseboard_client.standing import Standing, apply_failure, apply_results, due, next_due

if TYPE_CHECKING:
    from leaseboard_client.api import Client

log = logging.getLogger("leaseboard_client")


class Holding(Standing):
    """Standing on one work item under one epoch, held by a sync `Client`.

    Guarded calls (`effect`, `propose`, `guard`, `headers`) raise `LocalJeopardy` once the
    local deadline passes, and the authoritative error once the server says the lease is gone.
    """

    def __init__(
        self,
        client: Client,
        grant: Grant,
        *,
        on_lost: Callable[[Holding, LeaseError], object] | None = None,
    ) -> None:
        super().__init__(grant, timing=client.timing, clock=client.clock, on_lost=on_lost)
        self.client = client

    @contextlib.contextmanager
    def guard(self) -> Iterator[Holding]:
        """Enter only with standing. Recipients' epoch checks, not this, protect the writes."""
        self.ensure()
        yield self

    # -- guarded actions -------------------------------------------------------------------

    def effect(
        self,
        kind: str,
        target: str,
        *,
        idempotency_key: str | None = None,
        payload: Any = None,
        approval_wait_s: float = 0.0,
        approval_poll_s: float = APPROVAL_POLL_S,
    ) -> EffectScope:
        """`with holding.effect(kind, target) as fx:` proposes on entry, reports on exit
        (see leaseboard_client.effects). With `approval_wait_s`, a proposal held for an
        approver is asked again every `approval_poll_s` for up to that long while the background
        renewer keeps the lease (so the approval stays decidable); still undecided, it
        raises ApprovalRequired."""
        return EffectScope(
            self,
            kind,
            target,
            idempotency_key=idempotency_key,
            payload=payload,
            approval_wait_s=approval_wait_s,
            approval_poll_s=approval_poll_s,
        )

    def propose(
        self,
        kind: str,
        target: str,
        *,
        idempotency_key: str | None = None,
        payload: Any = None,
    ) -> EffectDecision:
        """Propose an effect under this lease (raises LocalJeopardy past the deadline); the
        caller reports its outcome. `effect()` does both."""
        self.ensure_may_propose()
        key = idempotency_key or new_idempotency_key()
        try:
            return self.client.propose_effect(
                self.lease_id, self.epoch, kind, target, idempotency_key=key, payload=payload
            )
        except CommitUnknown as exc:
            exc.idempotency_key = key
            self._seen(exc)
            unknown = exc
        except LeaseError as exc:
            self._seen(exc)
            raise
        # Recorded or not, authorized or not: learn which by asking again with the same key
        # (the first answer comes back if there was one), never by proposing anew.
        time.sleep(unknown_pause(unknown))
        self.ensure_may_propose()
        try:
            return self.client.propose_effect(
                self.lease_id, self.epoch, kind, target, idempotency_key=key, payload=payload
            )
        except TransientError as again:
            self._seen(again)
            raise unknown from again  # still unknown: the caller keeps the key and asks later
        except LeaseError as exc:
            self._seen(exc)
            raise

    def headers(self, effect: EffectDecision | None = None) -> dict[str, str]:
        """Headers for an outgoing effect call, with the effect's own token. Without an
        effect they carry the lease token, which proves standing but authorizes no effect:
        recipients refuse it (`no_effect`) unless configured to accept lease tokens."""
        return self._headers(effect.fencing_token if effect is not None else None)

    # Checkpoints and outcomes are allowed in jeopardy (docs/design.md §4), so only loss stops them.
    def checkpoint(self, data: Any) -> int:
        if self._lost is not None:
            raise self._lost
        try:
            return self.client.checkpoint(self.lease_id, self.epoch, data)
        except LeaseError as exc:
            self._seen(exc)
            raise

    def report_outcome(self, effect_id: str, outcome: str, detail: str | None = None) -> None:
        self.client.report_outcome(effect_id, outcome, detail)

    def renew_now(self) -> None:
        """Renew synchronously (the background renewer does this on its own)."""
        if self._lost is not None:
            raise self._lost
        try:
            renewal = self.client.renew(self.lease_id, self.epoch, timeout_s=self.request_timeout_s)
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

    def release(self) -> None:
        """Stop renewing and release on the server (idempotent; skipped if already lost)."""
        if self._mark_released():
            self.client.release(self.lease_id, self.epoch)

    def _forget(self) -> None:
        self.client.renewer.unregister(self)

    def __enter__(self) -> Holding:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            self.release()
        except LeaseError as error:
            # The lease will expire on its own; don't mask the body's exception with this one.
            log.warning("release of %s failed: %s", self.lease_id, error)


class Renewer:
    """Renews every registered holding, batching per client; one per process by default.

    `tick()` does one round and returns when it wants to run next, so tests can drive it
    with a fake clock and no thread (`start_thread=False`).
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, start_thread: bool = True):
        self.clock = clock
        self.start_thread = start_thread
        self.requests = 0  # batch requests sent, for tests and metrics
        self._holdings: dict[int, Holding] = {}
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def register(self, holding: Holding) -> None:
        with self._cond:
            self._holdings[id(holding)] = holding
            self._cond.notify_all()
        if self.start_thread:
            self._ensure_thread()

    def unregister(self, holding: Holding) -> None:
        with self._cond:
            self._holdings.pop(id(holding), None)
            self._cond.notify_all()

    def forget_client(self, client: Client) -> None:
        with self._cond:
            for key in [k for k, h in self._holdings.items() if h.client is client]:
                del self._holdings[key]

    def holdings(self) -> list[Holding]:
        with self._cond:
            return list(self._holdings.values())

    def tick(self) -> float | None:
        """Renew what is due (coalescing what is nearly due); return the next due time."""
        by_client: dict[int, list[Holding]] = {}
        for h in due(self.holdings(), self.clock()):
            by_client.setdefault(id(h.client), []).append(h)
        for group in by_client.values():
            self._renew_group(group)
        return next_due(self.holdings())

    def _renew_group(self, group: list[Holding]) -> None:
        client = group[0].client
        self.requests += 1
        try:
            results = client.renew_many(
                [(h.lease_id, h.epoch) for h in group],
                timeout_s=min(h.request_timeout_s for h in group),
            )
        except LeaseError as exc:
            apply_failure(group, exc, self.clock())
            return
        apply_results(group, results, self.clock())

    def _ensure_thread(self) -> None:
        with self._cond:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stopped = False
            self._thread = threading.Thread(
                target=self._run, name="leaseboard-renewer", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._holdings and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
            try:
                wake = self.tick()
            except Exception:  # the renewer must outlive one bad round
                log.exception("renewer round failed")
                wake = self.clock() + 1.0
            with self._cond:
                if self._stopped:
                    return
                if wake is not None:
                    delay = wake - self.clock()
                    if delay > 0:
                        self._cond.wait(timeout=delay)

    def stop(self, timeout_s: float = 5.0) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout_s)


_process_renewer: Renewer | None = None
_process_pid: int | None = None
_process_lock = threading.Lock()


def process_renewer() -> Renewer:
    """The shared renewer of this process (a forked child gets its own, with its own thread)."""
    global _process_renewer, _process_pid
    with _process_lock:
        if _process_renewer is None or _process_pid != os.getpid():
            _process_renewer = Renewer()
            _process_pid = os.getpid()
        return _process_renewer
