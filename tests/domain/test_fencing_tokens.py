"""Pure tests of signed fencing tokens: no database, no Django, time passed in."""

from __future__ import annotations

import ast
import base64
import json
from dataclasses import replace
from pathlib import Path

import pytest

from leaseboard.domain import fencing
from leaseboard.domain.fencing import (
    FencingClaims,
    InvalidToken,
    generate_private_key,
    jwks,
    key_id,
    public_key_raw,
    public_keys_from_jwks,
    sign_token,
    unverified_claims,
    verify_token,
)

NOW = 1_700_000_000_000
KEY_A = generate_private_key()
KEY_B = generate_private_key()
KID_A = key_id(public_key_raw(KEY_A))
KID_B = key_id(public_key_raw(KEY_B))
PUBLIC = {KID_A: public_key_raw(KEY_A)}


def claims(**overrides: object) -> FencingClaims:
    base = FencingClaims(
        work_key="invoice-42",
        epoch=7,
        lease_id="3f1c2b1e-0000-4000-8000-000000000001",
        holder="agent-7",
        issued_at_ms=NOW - 1_000,
        expires_at_ms=NOW + 15_000,
        kid=KID_A,
    )
    return replace(base, **overrides)  # type: ignore[arg-type]


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def resign_payload(token: str, **changes: object) -> str:
    """Change claims in the payload but keep the original signature (a tampering attempt)."""
    payload, sig = token.split(".")
    body = json.loads(unb64(payload))
    body.update(changes)
    return b64(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()) + "." + sig


def flip_signature_bit(token: str) -> str:
    payload, sig = token.split(".")
    raw = bytearray(unb64(sig))
    raw[10] ^= 0x01
    return payload + "." + b64(bytes(raw))


def test_it_round_trips_a_lease_token_and_an_effect_token() -> None:
    for original in (claims(), claims(effect_id="eff-1")):
        token = sign_token(original, private_key_raw=KEY_A)
        assert verify_token(token, public_keys=PUBLIC, now_ms=NOW) == original


def test_a_lease_token_leaves_out_the_effect_id() -> None:
    token = sign_token(claims(), private_key_raw=KEY_A)
    assert "effect_id" not in json.loads(unb64(token.split(".")[0]))


@pytest.mark.parametrize(
    ("name", "make_token", "kwargs", "code"),
    [
        ("tampered epoch", lambda t: resign_payload(t, epoch=8), {}, "forged"),
        ("tampered work key", lambda t: resign_payload(t, work_key="x"), {}, "forged"),
        ("tampered expiry", lambda t: resign_payload(t, expires_at_ms=NOW * 2), {}, "forged"),
        ("tampered holder", lambda t: resign_payload(t, holder="mallory"), {}, "forged"),
        ("tampered signature", flip_signature_bit, {}, "forged"),
        ("short signature", lambda t: t[:-6], {}, "forged"),
        ("signature from other key", None, {}, "forged"),
        ("unknown kid", lambda t: resign_payload(t, kid="0123456789abcdef"), {}, "unknown_key"),
        ("expired", lambda t: t, {"now_ms": NOW + 15_000}, "expired"),
        ("long expired", lambda t: t, {"now_ms": NOW + 10**9}, "expired"),
        ("wrong work key", lambda t: t, {"work_key": "invoice-43"}, "wrong_work"),
        ("below the epoch floor", lambda t: t, {"min_epoch": 8}, "stale_epoch"),
        ("empty", lambda t: "", {}, "malformed"),
        ("one part", lambda t: t.split(".")[0], {}, "malformed"),
        ("three parts", lambda t: t + ".x", {}, "malformed"),
        ("bad base64", lambda t: "!!!." + t.split(".")[1], {}, "malformed"),
        ("padded base64", lambda t: t.split(".")[0] + "==." + t.split(".")[1], {}, "malformed"),
        ("not json", lambda t: b64(b"nope") + "." + t.split(".")[1], {}, "malformed"),
        ("json list", lambda t: b64(b"[1]") + "." + t.split(".")[1], {}, "malformed"),
        ("string epoch", lambda t: resign_payload(t, epoch="7"), {}, "malformed"),
        ("bool epoch", lambda t: resign_payload(t, epoch=True), {}, "malformed"),
        ("extra claim", lambda t: resign_payload(t, admin=True), {}, "malformed"),
        ("missing claim", lambda t: resign_payload(t, holder=None), {}, "malformed"),
        ("other version", lambda t: resign_payload(t, v=2), {}, "malformed"),
        ("huge", lambda t: "a" * 10_000 + "." + "b", {}, "malformed"),
    ],
)
def test_it_refuses_bad_tokens_with_a_stable_code(name, make_token, kwargs, code) -> None:
    if make_token is None:  # signed by a key the recipient does not trust, kid kept
        good = sign_token(claims(kid=KID_B), private_key_raw=KEY_B)
        token = resign_payload(good, kid=KID_A)
    else:
        token = make_token(sign_token(claims(), private_key_raw=KEY_A))
    options = {"public_keys": PUBLIC, "now_ms": NOW, **kwargs}
    with pytest.raises(InvalidToken) as caught:
        verify_token(token, **options)
    assert caught.value.code == code, name


def test_a_forged_token_is_reported_as_forged_even_if_it_also_looks_expired() -> None:
    token = resign_payload(sign_token(claims(), private_key_raw=KEY_A), expires_at_ms=NOW - 5)
    with pytest.raises(InvalidToken) as caught:
        verify_token(token, public_keys=PUBLIC, now_ms=NOW, work_key="other")
    assert caught.value.code == "forged"


def test_expiry_is_exclusive_and_the_epoch_floor_is_inclusive() -> None:
    token = sign_token(claims(), private_key_raw=KEY_A)
    verify_token(token, public_keys=PUBLIC, now_ms=NOW + 14_999, min_epoch=7)
    with pytest.raises(InvalidToken):
        verify_token(token, public_keys=PUBLIC, now_ms=NOW + 15_000)


def test_rotation_with_two_kids_verifies_both_until_the_old_key_is_dropped() -> None:
    old = sign_token(claims(), private_key_raw=KEY_A)
    new = sign_token(claims(kid=KID_B, epoch=8), private_key_raw=KEY_B)
    both = public_keys_from_jwks(jwks({KID_A: public_key_raw(KEY_A), KID_B: public_key_raw(KEY_B)}))
    assert verify_token(old, public_keys=both, now_ms=NOW).kid == KID_A
    assert verify_token(new, public_keys=both, now_ms=NOW).kid == KID_B
    only_new = {KID_B: both[KID_B]}
    with pytest.raises(InvalidToken) as caught:
        verify_token(old, public_keys=only_new, now_ms=NOW)
    assert caught.value.code == "unknown_key"


def test_a_key_published_under_the_wrong_kid_cannot_verify_another_keys_tokens() -> None:
    token = sign_token(claims(), private_key_raw=KEY_A)
    with pytest.raises(InvalidToken) as caught:
        verify_token(token, public_keys={KID_A: public_key_raw(KEY_B)}, now_ms=NOW)
    assert caught.value.code == "forged"


def test_jwks_shape_and_round_trip() -> None:
    doc = jwks({KID_A: public_key_raw(KEY_A)})
    assert doc == {
        "keys": [
            {
                "kty": "OKP",
                "crv": "Ed25519",
                "alg": "EdDSA",
                "use": "sig",
                "kid": KID_A,
                "x": b64(public_key_raw(KEY_A)),
            }
        ]
    }
    json.dumps(doc)  # serializable as is
    assert public_keys_from_jwks(doc) == {KID_A: public_key_raw(KEY_A)}


def test_jwks_parsing_skips_other_key_types_and_refuses_broken_ed25519_keys() -> None:
    doc = jwks({KID_A: public_key_raw(KEY_A)})
    doc["keys"].append({"kty": "RSA", "kid": "rsa-1", "n": "x", "e": "AQAB"})
    assert set(public_keys_from_jwks(doc)) == {KID_A}
    for broken in (
        {"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k", "x": b64(b"short")}]},
        {"keys": [{"kty": "OKP", "crv": "Ed25519", "x": b64(public_key_raw(KEY_A))}]},
        {"keys": "nope"},
        [],
    ):
        with pytest.raises(ValueError):
            public_keys_from_jwks(broken)  # type: ignore[arg-type]


def test_key_ids_are_short_stable_and_distinct() -> None:
    assert key_id(public_key_raw(KEY_A)) == KID_A
    assert len(KID_A) == 16 and KID_A != KID_B
    assert len(generate_private_key()) == 32 and len(public_key_raw(KEY_A)) == 32


@pytest.mark.parametrize(
    "bad",
    [
        {"kid": "not-this-keys-id"},
        {"epoch": -1},
        {"epoch": True},
        {"work_key": ""},
        {"expires_at_ms": NOW - 5_000},
        {"effect_id": ""},
    ],
)
def test_signing_refuses_claims_that_could_never_verify(bad: dict) -> None:
    with pytest.raises(ValueError):
        sign_token(claims(**bad), private_key_raw=KEY_A)


def test_unverified_claims_reads_what_a_token_says_without_trusting_it() -> None:
    token = resign_payload(sign_token(claims(), private_key_raw=KEY_A), epoch=99)
    said = unverified_claims(token)
    assert said is not None and said.epoch == 99
    assert unverified_claims("garbage") is None


def test_the_fencing_module_imports_no_framework() -> None:
    tree = ast.parse(Path(fencing.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & {"django", "celery", "redis", "psycopg", "httpx"}


# -- the queue and policy version a token was decided under (optional claims) ------------------


def test_a_token_names_its_queue_and_policy_version_and_old_tokens_still_verify() -> None:
    named = sign_token(
        claims(effect_id="e-1", queue="payments", policy_version=7), private_key_raw=KEY_A
    )
    got = verify_token(named, public_keys=PUBLIC, now_ms=NOW, queue="payments")
    assert (got.queue, got.policy_version) == ("payments", 7)
    assert verify_token(named, public_keys=PUBLIC, now_ms=NOW, queue={"a", "payments"}).queue
    # A token from before the claims existed has neither key in its payload, and verifies.
    old = sign_token(claims(effect_id="e-2"), private_key_raw=KEY_A)
    body = json.loads(unb64(old.split(".")[0]))
    assert "queue" not in body and "policy_version" not in body
    assert verify_token(old, public_keys=PUBLIC, now_ms=NOW).queue is None


@pytest.mark.parametrize(
    ("queue_claim", "asked", "says"),
    [
        ("default", "payments", "decided in queue 'default'"),
        (None, "payments", "names no queue"),
    ],
)
def test_a_recipient_asking_for_a_queue_refuses_another_or_none(
    queue_claim: str | None, asked: str, says: str
) -> None:
    token = sign_token(claims(effect_id="e-3", queue=queue_claim), private_key_raw=KEY_A)
    with pytest.raises(InvalidToken) as caught:
        verify_token(token, public_keys=PUBLIC, now_ms=NOW, queue=asked)
    assert caught.value.code == "wrong_queue" and says in caught.value.detail


def test_the_queue_claim_is_signed_like_every_other() -> None:
    token = sign_token(claims(effect_id="e-4", queue="default"), private_key_raw=KEY_A)
    with pytest.raises(InvalidToken) as caught:
        verify_token(resign_payload(token, queue="payments"), public_keys=PUBLIC, now_ms=NOW)
    assert caught.value.code == "forged"


@pytest.mark.parametrize(
    "bad", [{"queue": ""}, {"queue": "q" * 101}, {"policy_version": -1}, {"policy_version": True}]
)
def test_signing_refuses_a_bad_queue_or_policy_version(bad: dict) -> None:
    with pytest.raises(ValueError):
        sign_token(claims(**bad), private_key_raw=KEY_A)
