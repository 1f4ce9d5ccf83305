"""Best-effort reports of refused effects to Leaseboard (POST /api/v1/recipient-reports).

A report is evidence for the dashboard, never part of the recipient's decision: it is sent
from a background thread, dropped when the queue is full, and a failure is only logged.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from typing import Any, Protocol

log = logging.getLogger(__name__)

REPORT_PATH = "/api/v1/recipient-reports"
REASONS = frozenset(
    {
        "stale_epoch",
        "forged",
        "expired",
        "unknown_key",
        "wrong_work",
        "malformed",
        "no_effect",
        "payload_mismatch",
        "wrong_queue",
    }
)
# Enough to identify the token (payload claims) without storing attacker-sized blobs.
TOKEN_REPORT_CHARS = 512
DETAIL_REPORT_CHARS = 1000


@dataclass(frozen=True)
class Refusal:
    """What a recipient refused and why; the body of one recipient report."""

    work_key: str | None
    epoch: int | None
    high_water: int | None
    reason: str
    recipient: str
    token: str | None = None
    detail: str = ""

    def body(self) -> dict[str, Any]:
        data = asdict(self)
        if data["token"] is not None:
            data["token"] = data["token"][:TOKEN_REPORT_CHARS]
        data["detail"] = (data["detail"] or "")[:DETAIL_REPORT_CHARS]
        return data


class Reporter(Protocol):
    def report(self, refusal: Refusal) -> None: ...


class RecipientReporter:
    """POSTs refusals with the recipient's own credential (`manage.py create_recipient`;
    an agent's token is refused); `background=False` sends inline (tests, scripts)."""

    def __init__(
        self,
        *,
        base_url: str,
        token: str,
        timeout_s: float = 2.0,
        background: bool = True,
        max_queue: int = 1000,
    ) -> None:
        self.url = base_url.rstrip("/") + REPORT_PATH
        self.token = token
        self.timeout_s = timeout_s
        self.background = background
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        self._queue: queue.Queue[Refusal | None] = queue.Queue(maxsize=max_queue)
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def report(self, refusal: Refusal) -> None:
        if refusal.reason not in REASONS:
            log.warning("recipient report with unknown reason %r not sent", refusal.reason)
            return
        if not refusal.work_key:
            # The server files reports under a work item; without one there is nothing to show.
            log.info("recipient refusal without a work key not reported: %s", refusal.detail)
            return
        if not self.background:
            self._send(refusal)
            return
        self._ensure_thread()
        try:
            self._queue.put_nowait(refusal)
        except queue.Full:
            # Under a flood of refusals we keep serving; the dashboard loses some evidence.
            self.dropped += 1
            log.warning("recipient report queue full; dropped report for %s", refusal.work_key)

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until queued reports are sent (or failed); True if the queue drained."""
        done = threading.Event()

        def wait_for_queue() -> None:
            self._queue.join()
            done.set()

        threading.Thread(target=wait_for_queue, daemon=True).start()
        return done.wait(timeout_s)

    def close(self, timeout_s: float = 5.0) -> None:
        if self._thread is not None:
            self.flush(timeout_s)
            self._queue.put(None)
            self._thread.join(timeout_s)
            self._thread = None

    def _ensure_thread(self) -> None:
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._worker, name="leaseboard-recipient-reporter", daemon=True
                )
                self._thread.start()

    def _worker(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                self._send(item)
            finally:
                self._queue.task_done()

    def _send(self, refusal: Refusal) -> bool:
        request = urllib.request.Request(
            self.url,
            data=json.dumps(refusal.body()).encode(),
            method="POST",
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                response.read()
            self.sent += 1
            return True
        except Exception as exc:  # best effort: nothing may reach the caller
            self.failed += 1
            log.warning("recipient report to %s failed: %s", self.url, exc)
            return False


class MemoryReporter:
    """Keeps refusals in a list; for tests and for recipients that log instead of posting."""

    def __init__(self) -> None:
        self.refusals: list[Refusal] = []

    def report(self, refusal: Refusal) -> None:
        self.refusals.append(refusal)
