"""Recipient-side token checks with no database: the verifier accepts the current epoch and
refuses stale, forged and expired tokens, reports each refusal, and the WSGI middleware and
Django decorator answer with problem details.
"""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from leaseboard_recipient import (
    FencingMiddleware,
    InMemoryEpochGuard,
    MemoryReporter,
    RecipientReporter,
    Refusal,
    TokenVerifier,
)
from leaseboard_recipient.tokens import (
    FencingClaims,
    generate_private_key,
    jwks,
    key_id,
    public_key_raw,
    sign_token,
)
from tests.recipient.keys import KEY, KID, NOW, PUBLIC


def token_for(
    work_key: str,
    epoch: int,
    *,
    key: bytes = KEY,
    expires: int = NOW + 15_000,
    effect: bool = True,
    **more: Any,
) -> str:
    """An effect's token by default; `effect=False` gives a lease token (from an acquire);
    `more` are further claims (digest, queue, policy_version)."""
    claims = FencingClaims(
        work_key=work_key,
        epoch=epoch,
        lease_id=str(uuid.uuid4()),
        holder="agent-1",
        issued_at_ms=NOW - 1_000,
        expires_at_ms=expires,
        kid=key_id(public_key_raw(key)),
        effect_id=str(uuid.uuid4()) if effect else None,
        **more,
    )
    return sign_token(claims, private_key_raw=key)


def make_verifier(**kwargs: Any) -> tuple[TokenVerifier, MemoryReporter]:
    reporter = MemoryReporter()
    options: dict[str, Any] = {
        "recipient": "payments",
        "public_keys": dict(PUBLIC),
        "guard": InMemoryEpochGuard(),
        "reporter": reporter,
        "clock_ms": lambda: NOW,
    }
    options.update(kwargs)
    return TokenVerifier(**options), reporter


def test_the_verifier_accepts_current_and_refuses_stale_tokens_and_reports_them() -> None:
    verifier, reporter = make_verifier()
    assert verifier.check(token_for("pay-1", 2), work_key="pay-1", epoch=2).accepted
    stale = verifier.check(token_for("pay-1", 1), work_key="pay-1")
    assert (stale.accepted, stale.code, stale.high_water, stale.epoch) == (
        False,
        "stale_epoch",
        2,
        1,
    )
    forged = verifier.check(token_for("pay-1", 9, key=generate_private_key()), work_key="pay-1")
    assert forged.code == "unknown_key"
    wrong = verifier.check(token_for("pay-2", 3), work_key="pay-1")
    assert wrong.code == "wrong_work"
    expired = verifier.check(token_for("pay-1", 3, expires=NOW), work_key="pay-1")
    assert expired.code == "expired"
    mismatch = verifier.check(token_for("pay-1", 2), work_key="pay-1", epoch=3)
    assert mismatch.code == "malformed"
    assert [r.reason for r in reporter.refusals] == [
        "stale_epoch",
        "unknown_key",
        "wrong_work",
        "expired",
        "malformed",
    ]
    first = reporter.refusals[0]
    assert (first.work_key, first.epoch, first.high_water, first.recipient) == (
        "pay-1",
        1,
        2,
        "payments",
    )
    # A missing token claims no standing: refused, not reported.
    assert verifier.check(None, work_key="pay-1").code == "malformed"
    assert len(reporter.refusals) == 5


def test_an_unknown_kid_triggers_one_rate_limited_jwks_refresh() -> None:
    new_key = generate_private_key()
    published: dict[str, bytes] = dict(PUBLIC)
    fetches = []
    clock = [0.0]

    def fetch(url: str) -> dict:
        fetches.append(url)
        return jwks(published)

    verifier, _ = make_verifier(
        public_keys=None,
        jwks_url="http://leaseboard.test/api/v1/fencing/keys",
        fetch=fetch,
        monotonic=lambda: clock[0],
    )
    assert verifier.check(token_for("k", 1), work_key="k").accepted
    assert len(fetches) == 1
    published[key_id(public_key_raw(new_key))] = public_key_raw(new_key)  # rotation
    clock[0] = 31.0
    assert verifier.check(token_for("k", 2, key=new_key), work_key="k").accepted
    assert len(fetches) == 2
    # Forged kids do not make us hammer the server: one fetch per interval at most.
    for _ in range(5):
        assert verifier.check(token_for("k", 3, key=generate_private_key()), work_key="k").code == (
            "unknown_key"
        )
    assert len(fetches) == 2
    # Retiring a key on the server stops it verifying here after the next refresh.
    del published[KID]
    assert verifier.refresh_keys()
    assert verifier.check(token_for("k", 4), work_key="k").code == "unknown_key"


class _Capture(BaseHTTPRequestHandler):
    received: list[tuple[str, str, dict]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Capture.received.append((self.path, self.headers["Authorization"], body))
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_the_reporter_posts_the_refusal_body_with_a_bearer_token() -> None:
    server = HTTPServer(("127.0.0.1", 0), _Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        reporter = RecipientReporter(
            base_url=f"http://127.0.0.1:{server.server_port}/", token="s3cret"
        )
        long_token = "x" * 5000
        reporter.report(
            Refusal(
                work_key="pay-1",
                epoch=1,
                high_water=2,
                reason="stale_epoch",
                recipient="payments",
                token=long_token,
                detail="older",
            )
        )
        assert reporter.flush(5)
        reporter.close()
    finally:
        server.shutdown()
        server.server_close()
    path, auth, body = _Capture.received[-1]
    assert path == "/api/v1/recipient-reports" and auth == "Bearer s3cret"
    assert set(body) == {
        "work_key",
        "epoch",
        "high_water",
        "reason",
        "recipient",
        "token",
        "detail",
    }
    assert body["reason"] == "stale_epoch" and len(body["token"]) < len(long_token)


def test_a_failed_report_never_breaks_the_recipient() -> None:
    reporter = RecipientReporter(base_url="http://127.0.0.1:9", token="t", background=False)
    verifier, _ = make_verifier(reporter=reporter)
    assert verifier.check(token_for("k", 2), work_key="k").accepted
    assert verifier.check(token_for("k", 1), work_key="k").code == "stale_epoch"
    assert reporter.failed == 1
    # Nothing to file without a work key (the server needs one): skipped, not failed.
    reporter.report(Refusal(None, None, None, "malformed", "payments"))
    assert reporter.failed == 1


def _call_wsgi(app: Any, headers: dict[str, str], method: str = "POST") -> tuple[str, dict | bytes]:
    environ = {"REQUEST_METHOD": method, "PATH_INFO": "/pay"}
    environ.update({"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()})
    seen: dict[str, Any] = {}
    body = b"".join(app(environ, lambda status, hdrs: seen.update(status=status, headers=hdrs)))
    if dict(seen["headers"]).get("Content-Type") == "application/problem+json":
        return seen["status"], json.loads(body)
    return seen["status"], body


def test_the_wsgi_middleware_refuses_with_problem_details() -> None:
    verifier, reporter = make_verifier()

    def app(environ: dict, start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        claims = environ.get("leaseboard.fencing")
        return [f"paid under epoch {claims.epoch}".encode() if claims else b"read"]

    fenced = FencingMiddleware(app, verifier=verifier)
    new = {"X-Fencing-Token": token_for("pay-1", 5), "X-Lease-Epoch": "5", "X-Work-Key": "pay-1"}
    assert _call_wsgi(fenced, new) == ("200 OK", b"paid under epoch 5")
    old = {"X-Fencing-Token": token_for("pay-1", 4), "X-Lease-Epoch": "4", "X-Work-Key": "pay-1"}
    status, problem = _call_wsgi(fenced, old)
    assert status == "409 Conflict"
    assert problem == {
        "type": "urn:leaseboard:problem:stale_epoch",
        "title": problem["title"],
        "status": 409,
        "code": "stale_epoch",
        "detail": problem["detail"],
        "current_epoch": 5,
        "your_epoch": 4,
        "current_generation": 0,
        "your_generation": 0,
    }
    status, problem = _call_wsgi(fenced, {**new, "X-Fencing-Token": new["X-Fencing-Token"][:-6]})
    assert status == "403 Forbidden" and problem["code"] == "forged"
    status, problem = _call_wsgi(fenced, {**new, "X-Lease-Epoch": "five"})
    assert status == "403 Forbidden" and problem["code"] == "malformed"
    assert _call_wsgi(fenced, {}, method="GET") == ("200 OK", b"read")  # reads are not fenced
    assert [r.reason for r in reporter.refusals] == ["stale_epoch", "forged"]


def test_the_django_decorator_refuses_a_stale_epoch() -> None:
    from django.conf import settings

    if not settings.configured:
        settings.configure(DEFAULT_CHARSET="utf-8", ALLOWED_HOSTS=["*"], USE_TZ=True)
    from django.http import HttpResponse
    from django.test import RequestFactory

    from leaseboard_recipient.django_guard import fenced

    verifier, reporter = make_verifier()

    @fenced(verifier)
    def pay(request: Any) -> HttpResponse:
        return HttpResponse(f"paid {request.fencing.epoch}")

    factory = RequestFactory()
    ok = pay(
        factory.post("/pay", headers={"X-Fencing-Token": token_for("p", 3), "X-Work-Key": "p"})
    )
    assert ok.status_code == 200 and ok.content == b"paid 3"
    stale = pay(
        factory.post("/pay", headers={"X-Fencing-Token": token_for("p", 2), "X-Work-Key": "p"})
    )
    assert stale.status_code == 409
    assert json.loads(stale.content)["current_epoch"] == 3
    assert stale["Content-Type"] == "application/problem+json"
    assert reporter.refusals[-1].reason == "stale_epoch"


def test_a_lease_token_is_refused_as_no_effect_unless_the_recipient_accepts_them() -> None:
    verifier, reporter = make_verifier()
    lease_token = token_for("lt-1", 4, effect=False)
    refused = verifier.check(lease_token, work_key="lt-1")
    assert (refused.accepted, refused.code) == (False, "no_effect")
    assert [r.reason for r in reporter.refusals] == ["no_effect"]
    assert verifier.guard.high_water("lt-1") is None  # type: ignore[union-attr]  # no mark moved
    # The explicit, documented setting keeps the old behaviour for a recipient that needs it.
    lenient, _ = make_verifier(accept_lease_tokens=True)
    assert lenient.check(lease_token, work_key="lt-1").accepted
    # ...but never for an expired token.
    dead = token_for("lt-1", 5, effect=False, expires=NOW)
    assert lenient.check(dead, work_key="lt-1").code == "expired"


def test_a_paused_holders_token_is_refused_by_time_where_the_successor_was_never_seen() -> None:
    """The recipient never met the successor (its mark is still at the paused holder's
    epoch): the late send is refused because the token died with the lease's standing."""
    clock = [NOW]
    verifier, reporter = make_verifier(clock_ms=lambda: clock[0])
    token = token_for("paused-1", 7, expires=NOW + 15_000)  # the lease's expiry at issue
    assert verifier.check(token, work_key="paused-1").accepted
    clock[0] = NOW + 15_000  # the holder paused past its lease; epoch 8 exists elsewhere
    late = verifier.check(token, work_key="paused-1")
    assert (late.accepted, late.code) == (False, "expired")
    assert verifier.guard.high_water("paused-1") == 7  # type: ignore[union-attr]
    assert reporter.refusals[-1].reason == "expired"


def test_the_online_check_refuses_a_superseded_epoch_and_fails_closed() -> None:
    from leaseboard_recipient import OnlineAnswer

    answers: list[Any] = [OnlineAnswer(valid=False, current_epoch=9, code="stale_epoch")]

    def online(token: str) -> OnlineAnswer:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    verifier, _ = make_verifier(online=online)
    stale = verifier.check(token_for("on-1", 8), work_key="on-1")
    assert (stale.code, stale.high_water) == ("stale_epoch", 9)
    answers.append(OSError("connection refused"))
    down = verifier.check(token_for("on-1", 9), work_key="on-1")
    assert down.code == "unavailable"
    answers.append(OnlineAnswer(valid=True, current_epoch=9))
    assert verifier.check(token_for("on-1", 9), work_key="on-1").accepted


def test_an_epoch_notice_raises_the_mark_only_when_signed_with_the_secret() -> None:
    import hashlib
    import hmac

    from leaseboard_recipient import EpochNoticeReceiver

    guard = InMemoryEpochGuard()
    receiver = EpochNoticeReceiver(secret="whsec_x", guard=guard, clock_s=lambda: 1_000.0)
    body = json.dumps({"type": "epoch_advanced", "work_key": "n-1", "epoch": 4}).encode()

    def signed(secret: str, t: int = 1_000) -> str:
        mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
        return f"t={t},v1={mac}"

    assert receiver.handle(body, signed("wrong"))[0] == 401
    assert receiver.handle(body, signed("whsec_x", t=1))[0] == 401  # stale timestamp
    assert guard.high_water("n-1") is None
    status, answer = receiver.handle(body, signed("whsec_x"))
    assert (status, answer["applied"][0]["high_water"]) == (200, 4)
    body = json.dumps(
        {
            "type": "epoch_advanced",
            "notices": [{"work_key": "n-2", "epoch": 7}, {"work_key": "n-1", "epoch": 2}],
        }
    ).encode()
    status, answer = receiver.handle(body, signed("whsec_x"))  # a batch; a lower epoch is moot
    assert status == 200 and [a["high_water"] for a in answer["applied"]] == [7, 4]
    verifier, _ = make_verifier(guard=guard)
    late = verifier.check(token_for("n-1", 3), work_key="n-1")
    assert (late.code, late.high_water) == ("stale_epoch", 4)
    # A notice with a generation (after a failover) outranks any epoch of the generation before.
    body = json.dumps(
        {"type": "epoch_advanced", "work_key": "n-1", "epoch": 1, "generation": 2}
    ).encode()
    status, answer = receiver.handle(body, signed("whsec_x"))
    assert status == 200 and answer["applied"][0]["high_water_generation"] == 2
    assert guard.mark("n-1") == (2, 1)


def test_the_guards_check_is_a_span_with_its_decision_when_tracing_is_on() -> None:
    from tests.otel import in_memory_tracing, named

    verifier, _ = make_verifier()
    with in_memory_tracing() as (_, exporter):
        assert verifier.check(token_for("pay-7", 4), work_key="pay-7").accepted
        assert verifier.check(token_for("pay-7", 3), work_key="pay-7").code == "stale_epoch"
        accepted, refused = named(exporter, "leaseboard.recipient.check")
    assert accepted.attributes is not None and refused.attributes is not None
    assert dict(accepted.attributes) | {"leaseboard.effect_id": "-"} == {
        "leaseboard.recipient": "payments",
        "leaseboard.decision": "accepted",
        "leaseboard.work_key": "pay-7",
        "leaseboard.epoch": 4,
        "leaseboard.high_water": 4,
        "leaseboard.effect_id": "-",
    }
    assert refused.attributes["leaseboard.decision"] == "refused"
    assert refused.attributes["leaseboard.code"] == "stale_epoch"
    assert refused.attributes["leaseboard.high_water"] == 4
    assert refused.attributes["error.type"] == "stale_epoch"
    # Off (no provider): no span is made, and the check answers the same.
    assert verifier.check(token_for("pay-7", 4), work_key="pay-7").accepted


def decided(work_key: str, queue: str | None, content: Any, epoch: int = 1) -> str:
    """An effect's token decided in `queue` (None: issued before tokens named it) on
    exactly `content`."""
    return token_for(
        work_key,
        epoch,
        digest=content.digest,
        queue=queue,
        policy_version=3 if queue else None,
    )


def test_a_payments_recipient_accepts_payments_only_from_the_payments_queue() -> None:
    """The guard requires a queue per effect kind: a payment decided in a laxer queue (or
    by a token from before tokens named their queue) is refused as wrong_queue, and
    reported; a kind no glob names comes from any queue."""
    from leaseboard_recipient import EffectContent

    verifier, reporter = make_verifier(queues_by_kind={"payment.*": "payments"})
    refund = EffectContent("payment.refund", "order-1", {"amount_cents": 900_000_000})
    email = EffectContent("email.send", "ops", {"to": "ops"})
    answers = {
        key: verifier.check(decided(key, queue, content), work_key=key, content=content).code
        for key, queue, content in [
            ("w-1", "payments", refund),
            ("w-2", "default", refund),
            ("w-3", None, refund),
            ("w-4", "default", email),
        ]
    }
    assert answers == {"w-1": None, "w-2": "wrong_queue", "w-3": "wrong_queue", "w-4": None}
    assert [(r.work_key, r.reason) for r in reporter.refusals] == [
        ("w-2", "wrong_queue"),
        ("w-3", "wrong_queue"),
    ]
    # Without saying what it executes, a check cannot be told which queues apply: refused.
    no_content = verifier.check(decided("w-5", "payments", refund), work_key="w-5")
    assert no_content.code == "wrong_queue"


def test_a_recipient_of_one_kind_of_effect_names_its_queue_without_content() -> None:
    from leaseboard_recipient import EffectContent

    verifier, _ = make_verifier(queues="payments")
    charge = EffectContent("payment.charge", "acme", {})
    assert verifier.check(decided("p-1", "payments", charge), work_key="p-1").accepted
    refused = verifier.check(decided("p-2", "ledger-sync", charge), work_key="p-2")
    assert refused.code == "wrong_queue" and "ledger-sync" in refused.detail
    # Old tokens (no queue claim) still verify where no queue is asked for.
    plain, _ = make_verifier()
    assert plain.check(decided("p-3", None, charge), work_key="p-3").accepted
