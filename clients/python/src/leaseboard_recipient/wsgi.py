"""WSGI middleware that fences a recipient's mutating requests by lease epoch.

Reads X-Fencing-Token, X-Lease-Epoch and X-Work-Key; refuses with 409 (stale_epoch) or 403
(token error) as problem-details JSON. The check runs before the app's own transaction;
for the fully safe form, call `TokenVerifier.check_in` inside that transaction instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from leaseboard_recipient.tokens import EffectContent
from leaseboard_recipient.verifier import Decision, TokenVerifier, problem_for

TOKEN_HEADER = "X-Fencing-Token"
EPOCH_HEADER = "X-Lease-Epoch"
WORK_KEY_HEADER = "X-Work-Key"
MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
ENVIRON_KEY = "leaseboard.fencing"


def _environ_name(header: str) -> str:
    return "HTTP_" + header.upper().replace("-", "_")


def decide_from_headers(
    verifier: TokenVerifier,
    get: Callable[[str], str | None],
    *,
    cursor: Any = None,
    content: EffectContent | None = None,
) -> Decision:
    """Run the fence for one request, given a header getter; shared by WSGI and Django.
    `content` is the effect the request executes (kind, target, payload), checked against
    the token's digest."""
    token = get(TOKEN_HEADER)
    work_key = get(WORK_KEY_HEADER) or None
    raw_epoch = get(EPOCH_HEADER)
    epoch: int | None = None
    if raw_epoch:
        # ASCII digits only: int() would also take " 7", "1_000" and other scripts' digits.
        if raw_epoch.isascii() and raw_epoch.isdigit() and len(raw_epoch) <= 19:
            epoch = int(raw_epoch)
        else:
            return Decision(
                accepted=False,
                code="malformed",
                work_key=work_key,
                detail=f"{EPOCH_HEADER} must be a non-negative integer",
            )
    if cursor is not None:
        return verifier.check_in(cursor, token, work_key=work_key, epoch=epoch, content=content)
    return verifier.check(token, work_key=work_key, epoch=epoch, content=content)


def problem_response(decision: Decision) -> tuple[int, list[tuple[str, str]], bytes]:
    status, body = problem_for(decision)
    payload = json.dumps(body).encode()
    headers = [
        ("Content-Type", "application/problem+json"),
        ("Content-Length", str(len(payload))),
    ]
    return status, headers, payload


_REASONS = {403: "Forbidden", 409: "Conflict"}


class FencingMiddleware:
    """Wrap a WSGI app: fenced requests reach it only with a valid, current epoch.

    `applies(environ)` selects fenced requests (default: mutating methods). Accepted claims
    are put in `environ["leaseboard.fencing"]`. `describe(environ)` says which effect a
    request executes (an EffectContent; None: not known), checked against the token's
    digest; it may read the body only if it puts it back in `wsgi.input`.
    """

    def __init__(
        self,
        app: Callable[..., Iterable[bytes]],
        *,
        verifier: TokenVerifier,
        applies: Callable[[Mapping[str, Any]], bool] | None = None,
        describe: Callable[[dict[str, Any]], EffectContent | None] | None = None,
    ) -> None:
        self.app = app
        self.describe = describe
        self.verifier = verifier
        self.applies = applies or (
            lambda environ: environ.get("REQUEST_METHOD") in MUTATING_METHODS
        )

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        if not self.applies(environ):
            return self.app(environ, start_response)
        content = self.describe(environ) if self.describe is not None else None
        decision = decide_from_headers(
            self.verifier, lambda h: environ.get(_environ_name(h)), content=content
        )
        if not decision.accepted:
            status, headers, payload = problem_response(decision)
            start_response(f"{status} {_REASONS[status]}", headers)
            return [payload]
        environ[ENVIRON_KEY] = decision.claims
        return self.app(environ, start_response)
