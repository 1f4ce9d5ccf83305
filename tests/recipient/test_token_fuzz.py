"""Fuzzing the fencing-token parsers (issue 33, part 3): whatever a sender puts in
X-Fencing-Token, the recipient library (`verify_token`, `TokenVerifier.check`) and the
server (`leaseboard.domain.fencing`, the online check) answer a token code, never an
exception; every token that is not a well-formed token is `malformed`. Pure except the last
tests, which go through the API on PostgreSQL."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from leaseboard.domain import fencing as server_tokens
from leaseboard_recipient.guard import InMemoryEpochGuard
from leaseboard_recipient.tokens import (
    INVALID_TOKEN_CODES,
    MAX_TOKEN_CHARS,
    FencingClaims,
    InvalidToken,
    sign_token,
    unverified_claims,
    verify_token,
)
from leaseboard_recipient.verifier import TokenVerifier
from tests.recipient.keys import KEY, KID, NOW, PUBLIC

FUZZ = settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def nested(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


def raw_token(body: bytes | str) -> str:
    """A token with this payload and a signature of zeros."""
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    return f"{b64(raw)}.{b64(bytes(64))}"


def crafted(depth: int = 1400) -> str:
    """Issue 33's token: 3,821 characters whose claims nest 1,400 `[`."""
    body = '{"v":1,"work_key":' + nested(depth) + "}"
    return f"{b64(body.encode())}.{b64(bytes(64))}"


def valid(**changes: Any) -> str:
    claims = {
        "work_key": "invoice-42",
        "epoch": 7,
        "lease_id": "3f1c2b1e-0000-4000-8000-000000000001",
        "holder": "agent-7",
        "issued_at_ms": NOW - 1_000,
        "expires_at_ms": NOW + 15_000,
        "kid": KID,
        "effect_id": "e-1",
        **changes,
    }
    return sign_token(FencingClaims(**claims), private_key_raw=KEY)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
claim_names = st.sampled_from(
    ["v", "work_key", "epoch", "lease_id", "holder", "issued_at_ms", "expires_at_ms", "kid"]
    + ["effect_id", "digest", "x"]
)
claim_bodies = st.dictionaries(claim_names | st.text(max_size=8), json_values, max_size=10)


def _encoded(doc: Any) -> str:
    try:
        return json.dumps(doc)
    except ValueError:
        return "{}"


raw_payloads = st.one_of(
    claim_bodies.map(_encoded),
    st.builds(nested, st.integers(min_value=0, max_value=2500)),
    st.text(max_size=200),
    # Repeated claims, non-JSON constants, huge integers, escaped NUL and surrogates.
    st.sampled_from(
        [
            '{"v":1,"v":1}',
            '{"v":1,"epoch":NaN}',
            '{"v":1,"epoch":' + "9" * 5000 + "}",
            '{"v":1,"work_key":"a\\u0000b"}',
            '{"v":1,"work_key":"\\ud800"}',
            '{"v":true}',
        ]
    ),
).map(lambda text: text.encode("utf-8", "surrogatepass"))
signatures = st.one_of(st.binary(min_size=64, max_size=64), st.binary(max_size=80))
tokens = st.one_of(
    st.text(max_size=MAX_TOKEN_CHARS + 10),
    st.builds(lambda p, s: f"{b64(p)}.{b64(s)}", raw_payloads, signatures),
    st.builds(lambda p, s: f"{b64(p)}.{b64(s)}", st.binary(max_size=300), signatures),
    # A real token with one character changed, dropped or added.
    st.builds(
        lambda i, ch, how: (
            lambda t: (
                t[:i] + ch + t[i + 1 :] if how == 0 else t[:i] + t[i + 1 :] if how == 1 else t + ch
            )
        )(valid()),
        st.integers(min_value=0, max_value=300),
        st.characters(),
        st.integers(min_value=0, max_value=2),
    ),
)


@FUZZ
@given(token=tokens)
@example(token=crafted())
@example(token=crafted(5000)[:MAX_TOKEN_CHARS])
@example(token="")
@example(token=".")
@example(token=valid() + "\x00")
def test_every_token_is_claims_or_a_token_code_in_both_parsers(token: str) -> None:
    for verify in (verify_token, server_tokens.verify_token):
        try:
            claims = verify(token, public_keys=PUBLIC, now_ms=NOW)
        except InvalidToken as exc:
            assert exc.code in INVALID_TOKEN_CODES
        else:
            assert isinstance(claims.epoch, int) and 0 <= claims.epoch < 2**63
    said = unverified_claims(token)  # never raises either
    assert said is None or isinstance(said, FencingClaims)


@FUZZ
@given(token=tokens)
@example(token=crafted())
def test_the_verifier_answers_a_decision_for_every_token(token: str) -> None:
    verifier = TokenVerifier(
        recipient="fuzz", public_keys=PUBLIC, guard=InMemoryEpochGuard(), clock_ms=lambda: NOW
    )
    decision = verifier.check(token, work_key=None)
    assert decision.accepted is False or decision.claims is not None
    assert decision.accepted or decision.code in INVALID_TOKEN_CODES | {"stale_epoch"}


@FUZZ
@given(body=raw_payloads, signature=signatures)
def test_a_payload_that_is_not_a_flat_claims_object_is_malformed(
    body: bytes, signature: bytes
) -> None:
    token = f"{b64(body)}.{b64(signature)}"
    try:
        verify_token(token, public_keys=PUBLIC, now_ms=NOW)
    except InvalidToken as exc:
        # A payload that decodes to the claims can only fail later (kid, signature).
        assert exc.code in {"malformed", "unknown_key", "forged"}
        if exc.code != "malformed":
            assert unverified_claims(token) is not None


@pytest.mark.parametrize(
    "token",
    [
        crafted(),
        raw_token('{"v":1,"v":1}'),
        raw_token('{"v":true}'),
        raw_token(nested(3)),
        raw_token("{}".encode("utf-16")),
    ],
    ids=["1400-brackets", "repeated-claim", "true-version", "nested", "utf-16"],
)
def test_finding_a_crafted_token_is_malformed_not_an_exception(token: str) -> None:
    """Issue 33: 1,400 nested `[` made verify_token and TokenVerifier.check raise
    RecursionError (any unauthenticated sender could crash a recipient)."""
    with pytest.raises(InvalidToken) as refused:
        verify_token(token, public_keys=PUBLIC, now_ms=NOW)
    assert refused.value.code == "malformed"
    verifier = TokenVerifier(recipient="r", public_keys=PUBLIC, guard=InMemoryEpochGuard())
    assert verifier.check(token, work_key="invoice-42").code == "malformed"


@pytest.mark.parametrize(
    "claim", [{"work_key": "a\x00b"}, {"holder": "x\ud800"}, {"epoch": 2**63}, {"epoch": 2**70}]
)
def test_a_signed_token_with_an_unstorable_claim_is_malformed(claim: dict[str, Any]) -> None:
    # Signed by the real key: only the parser stands between it and a database error.
    body = {
        "v": 1,
        "work_key": "w",
        "epoch": 1,
        "lease_id": "l",
        "holder": "h",
        "issued_at_ms": 1,
        "expires_at_ms": NOW + 1,
        "kid": KID,
        **claim,
    }
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    segment = b64(json.dumps(body).encode())
    signature = Ed25519PrivateKey.from_private_bytes(KEY).sign(segment.encode())
    with pytest.raises(InvalidToken) as refused:
        verify_token(f"{segment}.{b64(signature)}", public_keys=PUBLIC, now_ms=NOW)
    assert refused.value.code == "malformed"


@FUZZ
@given(
    work_key=st.text(min_size=1, max_size=200).filter(lambda s: s.isprintable()),
    epoch=st.integers(min_value=0, max_value=2**63 - 1),
)
def test_every_token_the_server_signs_parses_back(work_key: str, epoch: int) -> None:
    token = valid(work_key=work_key, epoch=epoch)
    claims = verify_token(token, public_keys=PUBLIC, now_ms=NOW)
    assert (claims.work_key, claims.epoch) == (work_key, epoch)


@pytest.mark.parametrize("header", [" 7", "1_000", "٣", "+7", "7" * 20])
def test_the_epoch_header_takes_ascii_digits_only(header: str) -> None:
    from leaseboard_recipient.wsgi import decide_from_headers

    verifier = TokenVerifier(recipient="r", public_keys=PUBLIC, guard=InMemoryEpochGuard())
    headers = {"X-Fencing-Token": valid(), "X-Lease-Epoch": header}
    decision = decide_from_headers(verifier, headers.get)
    assert (decision.accepted, decision.code) == (False, "malformed")


# -- through the server's online check -----------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db
def test_finding_the_online_check_answers_malformed_for_the_crafted_token(api, recipient):
    """Issue 33: `fencing/check` answered 500 for the 1,400-bracket token."""
    _, credential = recipient("fuzzed")
    for token in (crafted(), raw_token('{"v":1,"work_key":"a\\u0000"}')):
        r = api.post("/api/v1/fencing/check", {"fencing_token": token}, credential)
        assert r.status_code == 200, r.content
        assert (r.json_body["valid"], r.json_body["code"]) == (False, "malformed")


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_online_check_never_answers_5xx(api, recipient):  # type: ignore[no-untyped-def]
    _, credential = recipient("fuzzer")

    @settings(FUZZ, max_examples=60)
    @given(token=tokens.filter(lambda t: 0 < len(t) <= 4096 and "\x00" not in t))
    def check(token: str) -> None:
        try:
            token.encode("utf-8")
        except UnicodeEncodeError:
            return  # a lone surrogate cannot be sent as JSON text; test_fuzz covers it
        r = api.post("/api/v1/fencing/check", {"fencing_token": token}, credential)
        assert r.status_code < 500, r.content
        if r.status_code == 200 and not r.json_body["valid"]:
            assert r.json_body["code"] in INVALID_TOKEN_CODES | {"not_found", "stale_epoch"}

    check()
