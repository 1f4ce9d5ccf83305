"""Epoch-advance notices, from the recipient's side: Leaseboard POSTs
{"type": "epoch_advanced", "notices": [{work_key, epoch, notice_id}, ...]} (signed with the
webhook secret `manage.py recipient_webhook set` printed) soon after grants raise epochs;
the receiver checks the signature and raises the epoch guard's marks, so a paused holder's
late send is refused as stale although the successor never sent this recipient anything.

Standard library only. `EpochNoticeReceiver.handle(body, signature)` is framework-free;
`.wsgi` is a ready WSGI app for it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from leaseboard_recipient.guard import EpochGuard

SIGNATURE_HEADER = "X-Leaseboard-Signature"
MAX_BODY_BYTES = 256 * 1024  # a batch of up to 500 notices


def signature_valid(
    body: bytes, header: str | None, secret: str, *, now_s: float, tolerance_s: int = 300
) -> bool:
    """`t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>." + body>`, fresh within tolerance
    (the same scheme as Leaseboard's alert webhooks)."""
    if not header or not secret:
        return False
    try:
        parts = dict(part.split("=", 1) for part in header.split(","))
        timestamp = int(parts["t"])
        given = parts["v1"]
    except (ValueError, KeyError):
        return False
    if abs(now_s - timestamp) > tolerance_s:
        return False
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return hmac.compare_digest(mac.hexdigest(), given)


def _notice(item: Any) -> tuple[str, int, int]:
    # `generation` (docs/design.md §5): absent from servers before it, which is 0.
    work_key, epoch, generation = item["work_key"], item["epoch"], item.get("generation", 0)
    if not isinstance(work_key, str) or not work_key:
        raise ValueError("work_key")
    for name, value in (("epoch", epoch), ("generation", generation)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(name)
    return work_key, epoch, generation


class EpochNoticeReceiver:
    """Raises the guard's mark for each notice that verifies; answers (status, body)."""

    def __init__(
        self,
        *,
        secret: str,
        guard: EpochGuard,
        clock_s: Callable[[], float] = time.time,
        tolerance_s: int = 300,
    ) -> None:
        if not secret:
            raise ValueError("give the webhook secret Leaseboard signs notices with")
        self.secret = secret
        self.guard = guard
        self.clock_s = clock_s
        self.tolerance_s = tolerance_s
        self.applied = 0

    def handle(self, body: bytes, signature: str | None) -> tuple[int, dict[str, Any]]:
        if len(body) > MAX_BODY_BYTES:
            return 413, {"code": "validation_error", "detail": "notice too large"}
        if not signature_valid(
            body, signature, self.secret, now_s=self.clock_s(), tolerance_s=self.tolerance_s
        ):
            # 401 is not retried by Leaseboard (a 4xx other than 408/429): a wrong secret
            # shows in its delivery log instead of hammering us.
            return 401, {"code": "unauthenticated", "detail": "bad or stale signature"}
        try:
            doc = json.loads(body)
            # A batch ({"notices": [...]}); one notice on its own is taken as a batch of one.
            items = doc["notices"] if "notices" in doc else [doc]
            marks = [_notice(item) for item in items]
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            return 400, {"code": "validation_error", "detail": f"bad notice: {str(exc)[:200]}"}
        applied = []
        for work_key, epoch, generation in marks:
            # A mark already higher refuses the raise; fine: we know a newer order already.
            result = self.guard.check_and_advance(work_key, epoch, generation=generation)
            applied.append(
                {
                    "work_key": work_key,
                    "epoch": epoch,
                    "generation": generation,
                    "high_water": result.high_water,
                    "high_water_generation": result.generation,
                }
            )
        self.applied += len(applied)
        return 200, {"applied": applied}

    def wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """A WSGI app: POST the notice here (mount it at the URL you registered)."""
        if environ.get("REQUEST_METHOD") != "POST":
            status, body = 405, {"code": "method_not_allowed", "detail": "POST a notice"}
        else:
            try:
                length = int(environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY_BYTES:
                status, body = 413, {"code": "validation_error", "detail": "notice too large"}
            else:
                raw = environ["wsgi.input"].read(length) if length else b""
                status, body = self.handle(raw, environ.get("HTTP_X_LEASEBOARD_SIGNATURE"))
        payload = json.dumps(body).encode()
        start_response(
            f"{status} {HTTPStatus(status).phrase}",
            [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))],
        )
        return [payload]
