"""Offline verification of fencing tokens, then the epoch guard, then a report on refusal.

`TokenVerifier.check()` is what a recipient calls before an effect; `check_in()` does the
same inside the recipient's own PostgreSQL transaction (the safe form, docs/design.md §11).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import urllib.request
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from leaseboard_recipient.guard import EpochGuard, GuardResult
from leaseboard_recipient.online import OnlineAnswer
from leaseboard_recipient.reporter import Refusal, Reporter
from leaseboard_recipient.tokens import (
    EffectContent,
    FencingClaims,
    InvalidToken,
    fencing_order_text,
    public_keys_from_jwks,
    unverified_claims,
    verify_token,
)
from leaseboard_recipient.tracing import traced_check

log = logging.getLogger(__name__)

KEYS_PATH = "/api/v1/fencing/keys"


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class Decision:
    """The recipient's answer to one effect: accepted with claims, or refused with a code."""

    accepted: bool
    # stale_epoch | forged | expired | unknown_key | wrong_work | malformed | no_effect |
    # payload_mismatch (the request is not what the token was decided on) | wrong_queue
    # (decided in a queue this recipient does not accept for the kind), or
    # from the online check: lease_expired | lease_released | lease_revoked | not_found |
    # unavailable (the check could not be asked: refused, fail closed)
    code: str | None = None
    claims: FencingClaims | None = None
    work_key: str | None = None
    epoch: int | None = None  # the epoch the caller presented (token's, else header's)
    high_water: int | None = None
    detail: str = ""
    # The fencing order is (generation, epoch) (docs/design.md §5): the presented token's
    # generation and the mark's (or Leaseboard's current) generation.
    generation: int = 0
    high_water_generation: int | None = None


def fetch_jwks(url: str, *, timeout_s: float = 5.0, bearer: str | None = None) -> dict[str, Any]:
    """GET a JWKS document with the standard library (recipients need no HTTP package)."""
    headers = {"Accept": "application/json"}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        doc = json.loads(response.read())
    if not isinstance(doc, dict):
        raise ValueError(f"{url} did not answer a JSON object")
    return doc


class TokenVerifier:
    """Holds public keys, verifies tokens offline, applies the epoch guard, reports refusals.

    Keys come from `public_keys` or from `jwks_url` (e.g. http://host/api/v1/fencing/keys),
    refreshed when a token names an unknown kid (key rotation) but at most once per
    `min_refresh_interval_s`, so forged kids cannot turn us into a load generator.

    Only an effect's token is accepted by default: a lease token (from an acquire) proves
    standing but names no effect and is refused as `no_effect`. `accept_lease_tokens=True`
    keeps the older behaviour for a recipient that fences on standing alone (docs/fencing.md
    says what that gives up). Expired tokens are always refused; `leeway_ms` must stay
    within the server's LEASEBOARD_FENCING_SKEW_MS, the time successors wait for it.
    `online` (an OnlineChecker) asks Leaseboard whether the standing is still current
    before the epoch guard runs, for effects that cannot be undone.

    Pass the request about to be executed as `content=EffectContent(kind, target,
    payload)`: the token's digest must match it, so an approval of 100.00 cannot carry
    900.00 (`payload_mismatch`). `require_content=True` refuses every check that does not
    say what it executes (recommended; the default keeps recipients written before content
    binding working on epoch fencing alone).

    `queues_by_kind` says which queues an effect kind may come from, by kind glob (`*` any
    run, `?` one character; the first that matches decides): `{"payment.*": "payments"}`
    accepts a payment only if it was decided in the `payments` queue, under that queue's
    rules, so an agent that admitted the same work to a laxer queue is refused
    (`wrong_queue`; so is a token from before tokens named their queue). Kinds no glob
    matches may come from any queue. With it set, a check must say what it executes.
    `queues` accepts tokens decided in these queues only, whatever the kind (a recipient
    that only ever takes one kind of effect, like a payments service, needs no content).
    """

    def __init__(
        self,
        *,
        recipient: str,
        public_keys: Mapping[str, bytes] | None = None,
        jwks_url: str | None = None,
        jwks_bearer: str | None = None,
        guard: EpochGuard | None = None,
        reporter: Reporter | None = None,
        clock_ms: Callable[[], int] = wall_clock_ms,
        leeway_ms: int = 0,
        min_refresh_interval_s: float = 30.0,
        fetch: Callable[[str], dict[str, Any]] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        accept_lease_tokens: bool = False,
        online: Callable[[str], OnlineAnswer] | None = None,
        require_content: bool = False,
        queues_by_kind: Mapping[str, str | Collection[str]] | None = None,
        queues: str | Collection[str] | None = None,
    ) -> None:
        if public_keys is None and jwks_url is None:
            raise ValueError("give public_keys or jwks_url")
        if leeway_ms < 0:
            raise ValueError("leeway_ms must not be negative")
        self.recipient = recipient
        self.jwks_url = jwks_url
        self.guard = guard
        self.reporter = reporter
        self.clock_ms = clock_ms
        # Leeway tolerates a recipient clock running ahead of the server's; keep it small.
        self.leeway_ms = leeway_ms
        self.min_refresh_interval_s = min_refresh_interval_s
        self.accept_lease_tokens = accept_lease_tokens
        self.online = online
        self.require_content = require_content
        self.queues_by_kind = [
            (_glob(kind), {names} if isinstance(names, str) else set(names))
            for kind, names in (queues_by_kind or {}).items()
        ]
        if any(not names for _, names in self.queues_by_kind):
            raise ValueError("queues_by_kind: every kind glob names at least one queue")
        self.queues = (
            None if queues is None else ({queues} if isinstance(queues, str) else set(queues))
        )
        if self.queues is not None and not self.queues:
            raise ValueError("queues: name at least one queue (None accepts any)")
        self._fetch = fetch or (lambda url: fetch_jwks(url, bearer=jwks_bearer))
        self._monotonic = monotonic
        self._static_keys: dict[str, bytes] = dict(public_keys or {})
        self._keys: dict[str, bytes] = dict(self._static_keys)
        self._last_refresh: float | None = None
        self._lock = threading.Lock()
        self._first_fetch = threading.Lock()

    @property
    def public_keys(self) -> dict[str, bytes]:
        return dict(self._keys)

    def refresh_keys(self, *, force: bool = True) -> bool:
        """Reload the JWKS; True if it was fetched. Keys given directly are always kept."""
        if self.jwks_url is None:
            return False
        with self._lock:
            now = self._monotonic()
            recent = (
                self._last_refresh is not None
                and now - self._last_refresh < self.min_refresh_interval_s
            )
            if recent and not force:
                return False
            self._last_refresh = now
        try:
            keys = public_keys_from_jwks(self._fetch(self.jwks_url))
        except Exception as exc:  # keep serving with the keys we have
            log.warning("fetching fencing keys from %s failed: %s", self.jwks_url, exc)
            return False
        with self._lock:
            # The JWKS is authoritative: rotation publishes old and new keys side by side, and
            # a key the server retired (perhaps compromised) must stop verifying here too.
            self._keys = {**self._static_keys, **keys}
        return True

    def verify(
        self, token: str, *, work_key: str | None = None, content: EffectContent | None = None
    ) -> FencingClaims:
        """Verify a token offline (and, given `content`, that it was decided on exactly that
        request); raises InvalidToken. Fetches keys on first use/unknown kid."""
        if not self._keys and self.jwks_url is not None:
            # Concurrent first requests wait for the one first fetch instead of verifying
            # against no keys (they were refused as unknown_key while it was in flight).
            with self._first_fetch:
                if not self._keys and self._last_refresh is None:
                    self.refresh_keys(force=True)
        now_ms = self.clock_ms() - self.leeway_ms
        keys = self._keys
        if content is None and self.require_content:
            raise InvalidToken(
                "payload_mismatch", "this recipient checks content: say what is executed"
            )
        rules = {
            "work_key": work_key,
            "require_effect": not self.accept_lease_tokens,
            "content": content,
            "queue": self.queues_for(content),
        }
        try:
            return verify_token(token, public_keys=keys, now_ms=now_ms, **rules)  # type: ignore[arg-type]
        except InvalidToken as exc:
            # Retry if we fetched now, or another thread did since we read the keys.
            if exc.code != "unknown_key" or (
                not self.refresh_keys(force=False) and self._keys is keys
            ):
                raise
        return verify_token(token, public_keys=self._keys, now_ms=now_ms, **rules)  # type: ignore[arg-type]

    def queues_for(self, content: EffectContent | None) -> set[str] | None:
        """The queues this effect may have been decided in (None: any)."""
        if not self.queues_by_kind:
            return self.queues
        if content is None:
            raise InvalidToken(
                "wrong_queue",
                "this recipient accepts some effect kinds only from certain queues: say what "
                "is executed (content)",
            )
        for pattern, names in self.queues_by_kind:
            if pattern.match(content.kind):
                return names
        return self.queues

    def check(
        self,
        token: str | None,
        *,
        work_key: str | None,
        epoch: int | None = None,
        content: EffectContent | None = None,
    ) -> Decision:
        """Verify then guard with `guard.check_and_advance`; reports and returns refusals."""
        return traced_check(
            self.recipient,
            lambda: self._decide(token, work_key, epoch, self._guard_check, content),
        )

    def check_in(
        self,
        cursor: Any,
        token: str | None,
        *,
        work_key: str | None,
        epoch: int | None = None,
        content: EffectContent | None = None,
    ) -> Decision:
        """Like `check`, but the epoch check runs in the caller's transaction via `cursor`.

        Needs a guard with `check_in` (PostgresEpochGuard). Accept means: do the write with
        this cursor, then commit; the mark commits with it or not at all.
        """
        guard_check_in = getattr(self.guard, "check_in", None)
        if guard_check_in is None:
            raise TypeError("check_in needs a guard with check_in(cursor, …), e.g. Postgres")
        return traced_check(
            self.recipient,
            lambda: self._decide(
                token,
                work_key,
                epoch,
                lambda k, e, g: guard_check_in(cursor, k, e, generation=g),
                content,
            ),
        )

    def _guard_check(self, work_key: str, epoch: int, generation: int) -> GuardResult:
        if self.guard is None:
            raise TypeError("TokenVerifier.check needs a guard")
        return self.guard.check_and_advance(work_key, epoch, generation=generation)

    def _decide(
        self,
        token: str | None,
        work_key: str | None,
        epoch: int | None,
        guard_check: Callable[[str, int, int], GuardResult],
        content: EffectContent | None = None,
    ) -> Decision:
        if not token:
            # No claim of standing at all: refuse, but there is nothing worth reporting.
            return Decision(
                accepted=False,
                code="malformed",
                work_key=work_key,
                epoch=epoch,
                detail="missing fencing token",
            )
        try:
            claims = self.verify(token, work_key=work_key, content=content)
        except InvalidToken as exc:
            said = unverified_claims(token)
            return self._refuse(
                Decision(
                    accepted=False,
                    code=exc.code,
                    work_key=work_key or (said.work_key if said else None),
                    epoch=said.epoch if said else epoch,
                    detail=exc.detail,
                ),
                token,
            )
        if epoch is not None and epoch != claims.epoch:
            return self._refuse(
                Decision(
                    accepted=False,
                    code="malformed",
                    claims=claims,
                    work_key=claims.work_key,
                    epoch=epoch,
                    detail=f"epoch header {epoch} does not match the token's epoch {claims.epoch}",
                ),
                token,
            )
        if self.online is not None:
            refused = self._ask_online(token, claims)
            if refused is not None:
                return self._refuse(refused, token)
        result = guard_check(claims.work_key, claims.epoch, claims.generation)
        if not result.accepted:
            return self._refuse(
                Decision(
                    accepted=False,
                    code="stale_epoch",
                    claims=claims,
                    work_key=claims.work_key,
                    epoch=claims.epoch,
                    generation=claims.generation,
                    high_water=result.high_water,
                    high_water_generation=result.generation,
                    detail=(
                        f"{fencing_order_text(*claims.order)} is older than "
                        f"{fencing_order_text(*result.order)} already seen for "
                        f"{claims.work_key!r}"
                    ),
                ),
                token,
            )
        return Decision(
            accepted=True,
            claims=claims,
            work_key=claims.work_key,
            epoch=claims.epoch,
            generation=claims.generation,
            high_water=result.high_water,
            high_water_generation=result.generation,
        )

    def _ask_online(self, token: str, claims: FencingClaims) -> Decision | None:
        """The online check's refusal, or None if the standing is current. Fails closed:
        a recipient that asks wants certainty, and an unanswered question gives none."""
        assert self.online is not None
        try:
            answer = self.online(token)
        except Exception as exc:
            log.warning("online fencing check failed: %s", exc)
            return Decision(
                accepted=False,
                code="unavailable",
                claims=claims,
                work_key=claims.work_key,
                epoch=claims.epoch,
                detail=f"the online fencing check could not be asked: {exc}"[:500],
            )
        if answer.valid:
            return None
        return Decision(
            accepted=False,
            code=answer.code or "stale_epoch",
            claims=claims,
            work_key=claims.work_key,
            epoch=claims.epoch,
            generation=claims.generation,
            high_water=answer.current_epoch,
            high_water_generation=answer.current_generation,
            detail=(
                f"Leaseboard says {fencing_order_text(*claims.order)} of {claims.work_key!r} "
                f"is not current ({answer.code}); current "
                f"{fencing_order_text(answer.current_generation or 0, answer.current_epoch or 0)}"
            ),
        )

    def _refuse(self, decision: Decision, token: str | None) -> Decision:
        if self.reporter is not None:
            try:
                self.reporter.report(
                    Refusal(
                        work_key=decision.work_key,
                        epoch=decision.epoch,
                        high_water=decision.high_water,
                        reason=decision.code or "malformed",
                        recipient=self.recipient,
                        token=token,
                        detail=decision.detail,
                    )
                )
            except Exception:  # a report never breaks the recipient
                log.exception("recipient report failed")
        return decision


def _glob(pattern: str) -> re.Pattern[str]:
    """An effect-kind glob as Leaseboard's rules write one: `*` any run, `?` one character."""
    if not isinstance(pattern, str) or not pattern:
        raise ValueError("queues_by_kind: a kind glob is a non-empty string")
    parts = (".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.compile("".join(parts) + r"\Z", re.DOTALL)


def problem_for(decision: Decision) -> tuple[int, dict[str, Any]]:
    """HTTP status and problem-details body (RFC 9457) for a refused decision."""
    code = decision.code or "malformed"
    if code == "unavailable":
        return 503, {
            "type": f"urn:leaseboard:problem:{code}",
            "title": "The online fencing check could not be asked; try again",
            "status": 503,
            "code": code,
            "detail": decision.detail,
        }
    if code == "stale_epoch" or code in _NOT_CURRENT:
        return 409, {
            "type": f"urn:leaseboard:problem:{code}",
            "title": (
                "The epoch is older than one this recipient has already seen"
                if code == "stale_epoch"
                else "The standing this token proves has ended"
            ),
            "status": 409,
            "code": code,
            "detail": decision.detail,
            "current_epoch": decision.high_water,
            "your_epoch": decision.epoch,
            "current_generation": decision.high_water_generation,
            "your_generation": decision.generation,
        }
    return 403, {
        "type": f"urn:leaseboard:problem:{code}",
        "title": _TOKEN_TITLES.get(code, "The fencing token was refused"),
        "status": 403,
        "code": code,
        "detail": decision.detail,
    }


# The online check's answers for standing that ended without a successor yet.
_NOT_CURRENT = frozenset({"lease_expired", "lease_released", "lease_revoked"})

_TOKEN_TITLES = {
    "no_effect": "The fencing token authorizes no effect (a lease token)",
    "not_found": "Leaseboard knows no such work item",
    "forged": "The fencing token's signature does not verify",
    "expired": "The fencing token has expired",
    "unknown_key": "The fencing token was signed with an unknown key",
    "wrong_work": "The fencing token is for another work item",
    "malformed": "The fencing token is missing or malformed",
    "payload_mismatch": "The request is not the effect the token was decided on",
    "wrong_queue": "The effect was not decided in a queue this recipient accepts for its kind",
}
