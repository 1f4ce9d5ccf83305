"""A held lease (`Holding`) and the one-per-process background `Renewer` that keeps them.

The renewer batches every due lease of a client into one POST /api/v1/leases/renew, so a
process holding a hundred leases sends about one request per renew interval.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from leaseboard_client.errors import (
    TERMINAL_CODES,
    LeaseError,
    LeaseReleased,
    LocalJeopardy,
    ProtocolError,
)

if TYPE_CHECKING:
    from leaseboard_client.api import Client, EffectDecision, Grant

log = logging.getLogger(__name__)


class Holding:
    """Standing on one work item under one epoch, as this process believes it.

    Guarded calls (`effect`, `guard`, `headers`) raise `LocalJeopardy` once the local
    deadline passes, and the authoritative error once the server says the lease is gone.
    """

    def __init__(
        self,
        client: Client,
        grant: Grant,
        *,
        on_lost: Callable[[Holding, LeaseError], None] | None = None,
    ) -> None:
        self.client = client
        self.lease_id = grant.lease_id
        self.work_key = grant.work_key
        self.epoch = grant.epoch
        self.ttl_ms = grant.ttl_ms
        self.checkpoint_data = grant.checkpoint  # the predecessor's latest checkpoint
        self.on_lost = on_lost
        self.interval_s = client.timing.interval_for(grant.renew_after_ms)
        self._lock = threading.Lock()
        self._fencing_token = grant.fencing_token
        self._deadline = client.timing.local_deadline(
            sent_at=grant.sent_at, expires_in_ms=grant.expires_in_ms
        )
        self.last_ack_sent_at = grant.sent_at
        self.next_renew_at = grant.sent_at + self.interval_s
        self.certainty: str | None = "active"
        self.consecutive_failures = 0
        self.last_error: LeaseError | None = None
        self._lost: LeaseError | None = None
        self._released = False

    # -- state -----------------------------------------------------------------------------

    @property
    def deadline(self) -> float:
        """Monotonic time after which this holder is in jeopardy whatever the server says."""
        return self._deadline

    @property
    def fencing_token(self) -> str | None:
        return self._fencing_token

    def remaining_s(self) -> float:
        return self._deadline - self.client.clock()

    @property
    def in_jeopardy(self) -> bool:
        return self.client.clock() >= self._deadline

    @property
    def lost(self) -> LeaseError | None:
        """The authoritative error that ended this holding, if any."""
        return self._lost

    @property
    def active(self) -> bool:
        return self._lost is None and not self._released and not self.in_jeopardy

    def ensure(self) -> None:
        """Raise unless this holder may act now (lost, released, or past the local deadline)."""
        if self._lost is not None:
            raise self._lost
        if self._released:
            raise LeaseReleased("this holding was released", code="lease_released")
        now = self.client.clock()
        if now >= self._deadline:
            raise LocalJeopardy(
                f"local deadline for {self.work_key!r} (epoch {self.epoch}) passed "
                f"{now - self._deadline:.3f} s ago; the last acknowledged renewal was sent "
                f"{now - self.last_ack_sent_at:.3f} s ago"
            )

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
    ) -> EffectDecision:
        """Propose an effect under this lease (raises LocalJeopardy past the deadline)."""
        self.ensure()
        return self._authoritative(
            lambda: self.client.propose_effect(
                self.lease_id,
                self.epoch,
                kind,
                target,
                idempotency_key=idempotency_key,
                payload=payload,
            )
        )

    def headers(self, effect: EffectDecision | None = None) -> dict[str, str]:
        """Headers for an outgoing effect call, with the effect's own token. Without an
        effect they carry the lease token, which proves standing but authorizes no effect:
        recipients refuse it (`no_effect`) unless configured to accept lease tokens."""
        self.ensure()
        token = (effect.fencing_token if effect is not None else None) or self._fencing_token
        headers = {"X-Lease-Epoch": str(self.epoch), "X-Work-Key": self.work_key}
        if token:
            headers["X-Fencing-Token"] = token
        return headers

    # Checkpoints and outcomes are allowed in jeopardy (DESIGN §4), so only loss stops them.
    def checkpoint(self, data: Any) -> int:
        if self._lost is not None:
            raise self._lost
        return self._authoritative(lambda: self.client.checkpoint(self.lease_id, self.epoch, data))

    def report_outcome(self, effect_id: str, outcome: str, detail: str | None = None) -> None:
        self.client.report_outcome(effect_id, outcome, detail)

    def renew_now(self) -> None:
        """Renew synchronously (the background renewer does this on its own)."""
        if self._lost is not None:
            raise self._lost
        try:
            renewal = self.client.renew(self.lease_id, self.epoch)
        except LeaseError as exc:
            self._renew_failed(exc, now=self.client.clock())
            raise
        self._renewed(
            sent_at=renewal.sent_at,
            expires_in_ms=renewal.expires_in_ms,
            fencing_token=renewal.fencing_token,
            certainty=renewal.certainty,
        )

    def release(self) -> None:
        """Stop renewing and release on the server (idempotent; skipped if already lost)."""
        self.client.renewer.unregister(self)
        with self._lock:
            if self._released:
                return
            self._released = True
            lost = self._lost
        if lost is None:
            self.client.release(self.lease_id, self.epoch)

    def __enter__(self) -> Holding:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            self.release()
        except LeaseError as error:
            # The lease will expire on its own; don't mask the body's exception with this one.
            log.warning("release of %s failed: %s", self.lease_id, error)

    # -- renewer callbacks -----------------------------------------------------------------

    def _authoritative(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except LeaseError as exc:
            if exc.code in TERMINAL_CODES:
                self._lose(exc)
            raise

    def _renewed(
        self,
        *,
        sent_at: float,
        expires_in_ms: int,
        fencing_token: str | None = None,
        certainty: str | None = None,
    ) -> None:
        deadline = self.client.timing.local_deadline(sent_at=sent_at, expires_in_ms=expires_in_ms)
        with self._lock:
            if self._lost is not None:
                return
            # Each ack is a lower bound on the lease's life; a late answer to an older
            # request must not pull the deadline back.
            self._deadline = max(self._deadline, deadline)
            self.last_ack_sent_at = max(self.last_ack_sent_at, sent_at)
            self.next_renew_at = self.last_ack_sent_at + self.interval_s
            self.consecutive_failures = 0
            self.last_error = None
            if fencing_token:
                self._fencing_token = fencing_token
            if certainty:
                self.certainty = certainty

    def _renew_failed(self, error: LeaseError, *, now: float) -> None:
        if error.code in TERMINAL_CODES:
            self._lose(error)
            return
        # One transient failure is not abdication: retry soon, the deadline still stands.
        with self._lock:
            self.consecutive_failures += 1
            self.last_error = error
            self.next_renew_at = now + min(self.client.timing.retry_s, self.interval_s)
        log.warning(
            "renew of %s failed (%d in a row, %.3f s to local deadline): %s",
            self.lease_id,
            self.consecutive_failures,
            self._deadline - now,
            error,
        )

    def _lose(self, error: LeaseError) -> None:
        with self._lock:
            if self._lost is not None or self._released:
                return
            self._lost = error
        self.client.renewer.unregister(self)
        if self.on_lost is not None:
            try:
                self.on_lost(self, error)
            except Exception:  # a callback bug must not kill the renewer
                log.exception("on_lost callback for %s raised", self.lease_id)


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
        now = self.clock()
        holdings = self.holdings()
        if not holdings:
            return None
        # Renewing a little early costs nothing and aligns leases into one request.
        due = [h for h in holdings if h.next_renew_at <= now + h.interval_s / 2]
        if min(h.next_renew_at for h in holdings) > now:
            due = []
        by_client: dict[int, list[Holding]] = {}
        for h in due:
            by_client.setdefault(id(h.client), []).append(h)
        for group in by_client.values():
            self._renew_group(group)
        remaining = self.holdings()
        return min((h.next_renew_at for h in remaining), default=None)

    def _renew_group(self, group: list[Holding]) -> None:
        client = group[0].client
        self.requests += 1
        try:
            results = client.renew_many([(h.lease_id, h.epoch) for h in group])
        except LeaseError as exc:
            # A failed request says nothing authoritative about any single lease.
            now = self.clock()
            for h in group:
                h._renew_failed(exc if exc.code not in TERMINAL_CODES else _opaque(exc), now=now)
            return
        by_id = {r.lease_id: r for r in results}
        now = self.clock()
        for h in group:
            result = by_id.get(h.lease_id)
            if result is None:
                h._renew_failed(ProtocolError("no result for this lease in batch renew"), now=now)
            elif result.ok and result.expires_in_ms is not None:
                h._renewed(
                    sent_at=result.sent_at,
                    expires_in_ms=result.expires_in_ms,
                    fencing_token=result.fencing_token,
                )
            else:
                h._renew_failed(result.error or ProtocolError("renew not ok"), now=now)

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


def _opaque(error: LeaseError) -> LeaseError:
    # A whole-request error carrying a lease code would otherwise end every lease in the batch.
    return ProtocolError(f"batch renew failed: {error}", status=error.status, problem=error.problem)


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
