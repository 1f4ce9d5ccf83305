"""Effect tokens bind to the content decided on, checked without a database: the digest's
canonical form, and the verifier's refusals (payload_mismatch) for changed content, for a
token that binds none, and for a check that does not say what it executes."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import pytest

from leaseboard_recipient import (
    EffectContent,
    FencingMiddleware,
    InMemoryEpochGuard,
    MemoryReporter,
    TokenVerifier,
    content_digest,
)
from leaseboard_recipient.tokens import (
    FencingClaims,
    canonical_json,
    sign_token,
)
from tests.recipient.keys import KEY, KID, NOW, PUBLIC

REFUND = EffectContent("payment.refund", "order-1", {"amount": "100.00", "payee": "Zoë"})


def token(digest: str | None) -> str:
    claims = FencingClaims(
        work_key="order-1",
        epoch=3,
        lease_id=str(uuid.uuid4()),
        holder="agent-1",
        issued_at_ms=NOW - 1_000,
        expires_at_ms=NOW + 15_000,
        kid=KID,
        effect_id=str(uuid.uuid4()),
        digest=digest,
    )
    return sign_token(claims, private_key_raw=KEY)


def verifier(**kw: Any) -> tuple[TokenVerifier, MemoryReporter]:
    reporter = MemoryReporter()
    v = TokenVerifier(
        recipient="payments",
        public_keys=PUBLIC,
        guard=InMemoryEpochGuard(),
        reporter=reporter,
        clock_ms=lambda: NOW,
        **kw,
    )
    return v, reporter


def test_the_digest_is_sha256_of_sorted_compact_utf8_json() -> None:
    body = (
        '{"kind":"payment.refund","payload":{"amount":"100.00","payee":"Zoë"},"target":"order-1"}'
    )
    assert canonical_json(
        {
            "target": "order-1",
            "payload": {"payee": "Zoë", "amount": "100.00"},
            "kind": "payment.refund",
        }
    ) == body.encode("utf-8")
    assert REFUND.digest == "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()
    # Key order never matters; any value does; a missing payload is the empty object.
    assert content_digest("k", "t", {"b": 1, "a": 2}) == content_digest("k", "t", {"a": 2, "b": 1})
    assert content_digest("k", "t", {"a": 1}) != content_digest("k", "t", {"a": 1.5})
    assert content_digest("k", "t", None) == content_digest("k", "t", {})
    with pytest.raises(ValueError):
        content_digest("k", "t", {"a": float("nan")})


@pytest.mark.parametrize(
    "sent",
    [
        EffectContent("payment.refund", "order-1", {"amount": "900.00", "payee": "Zoë"}),
        EffectContent("payment.refund", "order-2", REFUND.payload),
        EffectContent("payment.charge", "order-1", REFUND.payload),
        EffectContent("payment.refund", "order-1", {**REFUND.payload, "note": "extra"}),
    ],
)
def test_any_change_to_kind_target_or_payload_is_refused_and_reported(sent) -> None:  # type: ignore[no-untyped-def]
    v, reporter = verifier()
    decision = v.check(token(REFUND.digest), work_key="order-1", content=sent)
    assert (decision.accepted, decision.code) == (False, "payload_mismatch")
    assert [r.reason for r in reporter.refusals] == ["payload_mismatch"]
    assert v.guard.high_water("order-1") is None  # type: ignore[union-attr]
    assert v.check(token(REFUND.digest), work_key="order-1", content=REFUND).accepted


def test_a_token_binding_no_content_cannot_vouch_for_a_request() -> None:
    v, _ = verifier()
    old = token(None)  # an effect token issued before content binding
    assert v.check(old, work_key="order-1", content=REFUND).code == "payload_mismatch"
    # A recipient that does not say what it executes fences on the epoch alone...
    assert v.check(old, work_key="order-1").accepted
    # ...unless it asks for content binding on every check.
    strict, _ = verifier(require_content=True)
    assert strict.check(token(REFUND.digest), work_key="order-1").code == "payload_mismatch"


def test_the_wsgi_middleware_checks_what_describe_says_the_request_executes() -> None:
    v, _ = verifier()
    amounts = {"/refund/100": "100.00", "/refund/900": "900.00"}

    def describe(environ: dict[str, Any]) -> EffectContent:
        amount = amounts[environ["PATH_INFO"]]
        return EffectContent("payment.refund", "order-1", {"amount": amount, "payee": "Zoë"})

    def app(environ: Any, start_response: Any) -> list[bytes]:
        start_response("200 OK", [])
        return [b"done"]

    fenced = FencingMiddleware(app, verifier=v, describe=describe)
    statuses: list[str] = []
    for path in ("/refund/900", "/refund/100"):
        environ = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": path,
            "HTTP_X_FENCING_TOKEN": token(REFUND.digest),
            "HTTP_X_WORK_KEY": "order-1",
        }
        body = b"".join(fenced(environ, lambda status, headers: statuses.append(status)))
        if path == "/refund/900":
            assert b"payload_mismatch" in body
    assert [s.split()[0] for s in statuses] == ["403", "200"]


def test_the_online_checker_sends_the_requests_digest_never_its_payload() -> None:
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from leaseboard_recipient import OnlineChecker

    asked: list[dict[str, Any]] = []

    class Leaseboard(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            asked.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            body = json.dumps({"valid": False, "code": "payload_mismatch", "current_epoch": 3})
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Leaseboard)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        check = OnlineChecker(base_url=f"http://127.0.0.1:{server.server_port}", token="lbr_x")
        answer = check(token(REFUND.digest), REFUND)
    finally:
        server.shutdown()
    assert (answer.valid, answer.code) == (False, "payload_mismatch")
    assert asked[0]["digest"] == REFUND.digest and "payload" not in asked[0]
