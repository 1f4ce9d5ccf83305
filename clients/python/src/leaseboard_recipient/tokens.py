"""Signed fencing tokens (Ed25519): the server signs a lease's standing, recipients verify offline.

The one definition of the token format, shared by the Leaseboard server (which signs, through
`leaseboard.domain.fencing`) and recipients (which verify). Pure Python: imports
`cryptography` only. Time is passed in (`now_ms`); nothing here reads a clock.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import re
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

try:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )
except ImportError as exc:  # pragma: no cover - depends on how the package was installed
    raise ImportError(
        "leaseboard_recipient verifies Ed25519 tokens with the cryptography package: "
        "pip install 'leaseboard-client[recipient]'"
    ) from exc

TOKEN_VERSION = 1
# Far above any real token (~400 chars); stops a hostile header from costing us a big parse.
MAX_TOKEN_CHARS = 4096
SIGNATURE_BYTES = 64
KEY_BYTES = 32
# The claims are one flat JSON object: a token nested deeper is malformed before it is
# parsed (1,400 nested `[` raised RecursionError in json.loads, issue 33).
MAX_CLAIMS_NESTING = 2
# A claim's integer fits PostgreSQL's bigint (and every recipient's epoch column).
MAX_CLAIM_INT = 2**63 - 1

INVALID_TOKEN_CODES = frozenset(
    {
        "forged",
        "expired",
        "unknown_key",
        "wrong_work",
        "malformed",
        "stale_epoch",
        "no_effect",
        "payload_mismatch",
        "wrong_queue",
    }
)
QUEUE_MAX = 100  # a queue's name is at most 100 characters (a-z 0-9 _ -)
DIGEST_PREFIX = "sha256:"
DIGEST_CHARS = len(DIGEST_PREFIX) + 64


def canonical_json(value: Any) -> bytes:
    """The one spelling of a JSON value: sorted keys, no whitespace, UTF-8 (non-ASCII kept
    as itself, not escaped). Raises ValueError for what JSON cannot say (NaN, sets...)."""
    try:
        text = json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except TypeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    return text.encode("utf-8")


def content_digest(kind: str, target: str, payload: Any) -> str:
    """What an effect token was decided on: "sha256:" + the hex SHA-256 of the canonical
    JSON of {"kind", "payload", "target"}. A missing payload is the empty object."""
    body = {"kind": kind, "target": target, "payload": {} if payload is None else payload}
    return DIGEST_PREFIX + hashlib.sha256(canonical_json(body)).hexdigest()


@dataclass(frozen=True)
class EffectContent:
    """The request a recipient is about to execute, as the effect was proposed: its kind,
    its target and its payload (a JSON value; None is the empty object)."""

    kind: str
    target: str
    payload: Any = None

    @property
    def digest(self) -> str:
        return content_digest(self.kind, self.target, self.payload)


@dataclass(frozen=True)
class FencingClaims:
    work_key: str
    epoch: int
    lease_id: str
    holder: str  # executor name
    issued_at_ms: int
    expires_at_ms: int
    kid: str
    effect_id: str | None = None  # set when the token authorizes one effect
    # content_digest() of the effect's kind, target and payload: what was decided on.
    digest: str | None = None
    # The queue the work item is in, and (effect tokens) the queue's policy version the
    # effect was decided under: its rules and the rules for every queue. Absent from tokens
    # issued before they were carried (verify_token(queue=...) refuses those).
    queue: str | None = None
    policy_version: int | None = None
    # The fencing order is (generation, epoch), compared lexicographically: the generation
    # rises with every promotion of a new database primary (docs/design.md §5), so whatever
    # a lost primary handed out, every grant by its successor outranks it. Absent from the
    # token when 0 (single-node installations, and every token issued before it existed).
    generation: int = 0

    @property
    def order(self) -> tuple[int, int]:
        """The fencing order (generation, epoch): compare tokens by this, never by epoch."""
        return (self.generation, self.epoch)


def fencing_order_text(generation: int, epoch: int) -> str:
    """How an order reads in messages: "epoch 7", or "generation 2 epoch 7"."""
    return f"generation {generation} epoch {epoch}" if generation else f"epoch {epoch}"


class InvalidToken(Exception):
    """A token a recipient must refuse; `code` is stable and machine-readable.

    Codes: forged, expired, unknown_key, wrong_work, malformed, stale_epoch (only when
    `verify_token(min_epoch=..., min_generation=...)` is used), no_effect (a lease
    token, which names no effect, offered where `verify_token(require_effect=True)` asks
    for an effect's),
    payload_mismatch (the request differs from what the token was decided on, or the
    token binds no content where `verify_token(content=...)` asks for it) and wrong_queue
    (the token was decided in another queue, or names none, where `verify_token(queue=...)`
    asks for one).
    """

    def __init__(self, code: str, detail: str = "") -> None:
        if code not in INVALID_TOKEN_CODES:
            raise ValueError(f"unknown InvalidToken code {code!r}")
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code = code
        self.detail = detail or code


def _b64e(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64d(text: str) -> bytes:
    # Strict and canonical: unused trailing bits would otherwise give one token many spellings.
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ValueError("not base64url") from exc
    if not text or _b64e(raw) != text:
        raise ValueError("not canonical base64url")
    return raw


def generate_private_key() -> bytes:
    """A new raw 32-byte Ed25519 private key (seed)."""
    key = Ed25519PrivateKey.generate()
    return key.private_bytes(
        serialization.Encoding.Raw,
        serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    )


def public_key_raw(private_key_raw: bytes) -> bytes:
    """The raw 32-byte public key for a raw private key."""
    key = Ed25519PrivateKey.from_private_bytes(private_key_raw)
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


@functools.lru_cache(maxsize=16)
def _signer(private_key_raw: bytes) -> tuple[Ed25519PrivateKey, str]:
    """A signing key and its key id, made once per key: loading the key and deriving its
    public half cost about as much as the signature itself, on every token issued."""
    key = Ed25519PrivateKey.from_private_bytes(private_key_raw)
    public = key.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    return key, key_id(public)


def key_id(public_key_raw: bytes) -> str:
    """Short stable id of a public key: the first 16 hex digits of its SHA-256."""
    if len(public_key_raw) != KEY_BYTES:
        raise ValueError(f"an Ed25519 public key is {KEY_BYTES} bytes, got {len(public_key_raw)}")
    return hashlib.sha256(public_key_raw).hexdigest()[:16]


def _payload(claims: FencingClaims) -> dict[str, Any]:
    body = asdict(claims)
    if body["effect_id"] is None:
        del body["effect_id"]  # keep lease tokens short; absence means "not effect-bound"
    if body["digest"] is None:
        del body["digest"]  # lease tokens, and effect tokens issued before content binding
    for name in ("queue", "policy_version"):
        if body[name] is None:
            del body[name]  # optional claims: a token without them reads as before
    if not body["generation"]:
        del body["generation"]  # generation 0 is spelled as before it existed
    body["v"] = TOKEN_VERSION
    return body


def _check_claim_types(claims: FencingClaims) -> None:
    for name in ("work_key", "lease_id", "holder", "kid"):
        if not isinstance(getattr(claims, name), str) or not getattr(claims, name):
            raise ValueError(f"{name} must be a non-empty string")
    for name in ("epoch", "generation", "issued_at_ms", "expires_at_ms"):
        value = getattr(claims, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer")
    if claims.expires_at_ms <= claims.issued_at_ms:
        raise ValueError("expires_at_ms must be after issued_at_ms")
    if claims.effect_id is not None and (
        not isinstance(claims.effect_id, str) or not claims.effect_id
    ):
        raise ValueError("effect_id must be a non-empty string or None")
    if claims.digest is not None and (
        not isinstance(claims.digest, str)
        or len(claims.digest) != DIGEST_CHARS
        or not claims.digest.startswith(DIGEST_PREFIX)
        or claims.digest[len(DIGEST_PREFIX) :].strip("0123456789abcdef")
    ):
        raise ValueError("digest must be 'sha256:' and 64 hex digits, or None")
    if claims.queue is not None and (
        not isinstance(claims.queue, str) or not 0 < len(claims.queue) <= QUEUE_MAX
    ):
        raise ValueError(f"queue must be a string of 1 to {QUEUE_MAX} characters, or None")
    version = claims.policy_version
    if version is not None and (
        not isinstance(version, int) or isinstance(version, bool) or version < 0
    ):
        raise ValueError("policy_version must be a non-negative integer, or None")


def sign_token(claims: FencingClaims, *, private_key_raw: bytes) -> str:
    """Compact token: base64url(JSON payload) + "." + base64url(Ed25519 signature).

    The signature covers the encoded payload segment, so verification needs no JSON
    canonicalisation. `claims.kid` must name the signing key: a mismatch would make every
    token look forged, so it is refused here, where the wiring bug is.
    """
    _check_claim_types(claims)
    key, own_kid = _signer(bytes(private_key_raw))
    if claims.kid != own_kid:
        raise ValueError(f"claims.kid {claims.kid!r} does not match the signing key ({own_kid})")
    payload = json.dumps(_payload(claims), sort_keys=True, separators=(",", ":")).encode()
    segment = _b64e(payload)
    signature = key.sign(segment.encode("ascii"))
    return f"{segment}.{_b64e(signature)}"


def _parse(token: str) -> tuple[str, bytes, FencingClaims]:
    """Split and decode without checking the signature; raises InvalidToken("malformed")."""
    if not isinstance(token, str) or not token:
        raise InvalidToken("malformed", "empty token")
    if len(token) > MAX_TOKEN_CHARS:
        raise InvalidToken("malformed", "token too long")
    parts = token.split(".")
    if len(parts) != 2:
        raise InvalidToken("malformed", "expected two dot-separated parts")
    segment, sig_text = parts
    try:
        payload_raw = _b64d(segment)
        signature = _b64d(sig_text)
    except ValueError:
        raise InvalidToken("malformed", "parts are not base64url") from None
    body = _claims_json(payload_raw)
    if not isinstance(body, dict):
        raise InvalidToken("malformed", "payload is not a JSON object")
    version = body.pop("v", None)
    if type(version) is not int or version != TOKEN_VERSION:  # true == 1 in Python
        raise InvalidToken("malformed", f"unsupported token version (expected {TOKEN_VERSION})")
    names = {f.name for f in fields(FencingClaims)}
    if set(body) - names:
        raise InvalidToken("malformed", f"unexpected claims: {sorted(set(body) - names)}")
    try:
        claims = FencingClaims(**body)
        _check_claim_types(claims)
    except (TypeError, ValueError) as exc:
        raise InvalidToken("malformed", f"bad claims: {exc}") from None
    return segment, signature, claims


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')  # one branch per character: no backtracking
_NOT_BRACKET = re.compile(rb"[^\[\]{}]")
_UNSTORABLE = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")


def _nesting(raw: bytes) -> int:
    """How deep lists and objects nest in a JSON text (strings' contents ignored)."""
    depth = deepest = 0
    for ch in _NOT_BRACKET.sub(b"", _JSON_STRING.sub(b"", raw)):
        depth += 1 if ch in b"[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _claim_int(text: str) -> int:
    if len(text.lstrip("-")) > 19 or abs(value := int(text)) > MAX_CLAIM_INT:
        raise ValueError("an integer claim is at most 2^63 - 1")
    return value


def _claim_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for key, value in pairs:
        if key in body:
            # Two spellings of one claim: which one a parser keeps is not ours to guess.
            raise ValueError(f"claim {key!r} appears twice")
        if isinstance(value, str) and _UNSTORABLE.search(value):
            raise ValueError(f"claim {key!r} has a control character or a lone surrogate")
        body[key] = value
    return body


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _claims_json(raw: bytes) -> Any:
    """The decoded claims, bounded: strict UTF-8, nesting at most MAX_CLAIMS_NESTING, no
    repeated claim, no NaN or Infinity, integers within a bigint, no control character or
    lone surrogate in a string. Anything else raises InvalidToken("malformed")."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidToken("malformed", "payload is not UTF-8") from None
    if _nesting(raw) > MAX_CLAIMS_NESTING:
        raise InvalidToken("malformed", "payload nests too deep")
    try:
        return json.loads(
            text,
            object_pairs_hook=_claim_object,
            parse_int=_claim_int,
            parse_constant=_no_constant,
        )
    except (ValueError, RecursionError) as exc:
        raise InvalidToken(
            "malformed", f"payload is not a token's JSON: {str(exc)[:100]}"
        ) from None


def unverified_claims(token: str) -> FencingClaims | None:
    """The claims a token *says*, unverified; for refusal reports only, never for decisions."""
    try:
        return _parse(token)[2]
    except InvalidToken:
        return None


def verify_token(
    token: str,
    *,
    public_keys: Mapping[str, bytes],
    now_ms: int,
    work_key: str | None = None,
    min_epoch: int | None = None,
    min_generation: int = 0,
    require_effect: bool = False,
    content: EffectContent | None = None,
    queue: str | Collection[str] | None = None,
) -> FencingClaims:
    """Verify signature, expiry and (optionally) work key, fencing-order floor
    ((min_generation, min_epoch), compared lexicographically), that the token
    authorizes one effect, that `content` is exactly what it was decided on and that it was
    decided in `queue` (a name, or any of several); return the claims.

    Order matters: the signature is checked before any claim is trusted, so a forged token
    is reported as forged even if it also claims to be expired or for another work item.
    """
    segment, signature, claims = _parse(token)
    raw = public_keys.get(claims.kid)
    if raw is None:
        raise InvalidToken("unknown_key", f"no public key with kid {claims.kid!r}")
    if len(signature) != SIGNATURE_BYTES:
        raise InvalidToken("forged", "signature has the wrong length")
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(signature, segment.encode("ascii"))
    except InvalidSignature:
        raise InvalidToken("forged", "signature does not verify") from None
    if now_ms >= claims.expires_at_ms:
        raise InvalidToken(
            "expired", f"expired {now_ms - claims.expires_at_ms} ms ago (epoch {claims.epoch})"
        )
    if work_key is not None and claims.work_key != work_key:
        raise InvalidToken(
            "wrong_work", f"token is for work item {claims.work_key!r}, not {work_key!r}"
        )
    if min_epoch is not None and claims.order < (min_generation, min_epoch):
        raise InvalidToken(
            "stale_epoch",
            f"{fencing_order_text(*claims.order)} is below "
            f"{fencing_order_text(min_generation, min_epoch)}",
        )
    if require_effect and claims.effect_id is None:
        raise InvalidToken(
            "no_effect",
            f"a lease token (epoch {claims.epoch}) proves standing but authorizes no effect; "
            "send the token of the effect's authorization",
        )
    if content is not None:
        content_checked(claims, content)
    if queue is not None:
        queue_checked(claims, queue)
    return claims


def queue_checked(claims: FencingClaims, queue: str | Collection[str]) -> None:
    """Raise wrong_queue unless the token was decided in `queue` (or one of them). A token
    that names no queue (issued before tokens carried it) cannot vouch for one."""
    allowed = {queue} if isinstance(queue, str) else set(queue)
    if claims.queue is None:
        raise InvalidToken(
            "wrong_queue",
            f"the token names no queue; this recipient accepts it only from {sorted(allowed)}",
        )
    if claims.queue not in allowed:
        raise InvalidToken(
            "wrong_queue",
            f"the token was decided in queue {claims.queue!r}; this recipient accepts it only "
            f"from {sorted(allowed)}",
        )


def content_checked(claims: FencingClaims, content: EffectContent) -> None:
    """Raise payload_mismatch unless the token was decided on exactly this kind, target and
    payload. A token that binds no content (a lease token; an effect token issued before
    content binding) cannot vouch for any request, so it is refused too."""
    if claims.digest is None:
        raise InvalidToken(
            "payload_mismatch",
            "the token binds no effect content (a lease token, or one issued before content "
            "binding); propose the effect again",
        )
    try:
        digest = content.digest
    except ValueError as exc:
        raise InvalidToken("payload_mismatch", f"the request is not JSON: {exc}") from None
    if digest != claims.digest:
        raise InvalidToken(
            "payload_mismatch",
            f"the request ({content.kind} on {content.target!r}, {digest}) is not what the "
            f"token was decided on ({claims.digest}); a changed effect is a new proposal",
        )


def jwks(public_keys: Mapping[str, bytes]) -> dict[str, Any]:
    """A JSON Web Key Set (RFC 8037 OKP keys) publishing every verifying key, by kid."""
    return {
        "keys": [
            {
                "kty": "OKP",
                "crv": "Ed25519",
                "alg": "EdDSA",
                "use": "sig",
                "kid": kid,
                "x": _b64e(raw),
            }
            for kid, raw in sorted(public_keys.items())
        ]
    }


def public_keys_from_jwks(doc: dict[str, Any]) -> dict[str, bytes]:
    """Parse a JWKS into {kid: raw public key}; keys of other types are skipped."""
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise ValueError("a JWKS is an object with a 'keys' list")
    keys: dict[str, bytes] = {}
    for entry in doc["keys"]:
        if not isinstance(entry, dict):
            raise ValueError("each JWKS entry must be an object")
        # Other key types may share the set (RFC 7517 §5): skip rather than refuse them.
        if entry.get("kty") != "OKP" or entry.get("crv") != "Ed25519":
            continue
        kid, x = entry.get("kid"), entry.get("x")
        if not isinstance(kid, str) or not kid or not isinstance(x, str):
            raise ValueError("an Ed25519 JWK needs string 'kid' and 'x'")
        raw = _b64d(x)
        if len(raw) != KEY_BYTES:
            raise ValueError(f"key {kid!r} is {len(raw)} bytes, expected {KEY_BYTES}")
        keys[kid] = raw
    return keys
