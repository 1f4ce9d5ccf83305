"""API rate limits (docs/design.md §9): fixed windows per credential and per client address.

- A request with a bearer token is charged to that credential: LEASEBOARD_RATE_LIMIT_AGENT,
  or LEASEBOARD_RATE_LIMIT_RECIPIENT on the recipient-only paths (a payments service may ask
  for every payment it takes).
- A request without one, or whose token was refused (401), is charged to its client address
  (LEASEBOARD_RATE_LIMIT_ADDRESS), so a bad-token flood meets 429 while agents sharing a NAT
  address with it keep their own budgets.

Counters live in Redis when REDIS_URL (or a Redis broker) is configured, shared by every web
process, and in this process's memory on the embedded default. One counter round trip per
request (a second only after a refused token). Hand-written rather than django-ratelimit:
that library spends two or three cache round trips per limit (`add`, then Django's Redis
`incr` does EXISTS + INCRBY) and cannot charge an address only when the credential fails.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import HttpRequest

log = logging.getLogger(__name__)

KEY_PREFIX = "lb:rl:"
REDIS_TIMEOUT_S = 0.25
# After a Redis error, count in process memory for this long before trying Redis again:
# agents' renewals must not fail, or wait on timeouts, because the limiter's store is down.
REDIS_RETRY_AFTER_S = 5.0
LOCAL_MAX_WINDOWS = 100_000
RECIPIENT_PATHS = ("/api/v1/fencing/check", "/api/v1/recipient-reports")

# INCR the window's counter, start its expiry on the first hit, and say how long is left
# when the count is over the limit. KEYS[1]: counter; ARGV: window seconds, limit.
CHARGE_LUA = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
if n <= tonumber(ARGV[2]) then return {n, 0} end
local ttl = redis.call('TTL', KEYS[1])
if ttl < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}
"""


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    limit: str = ""  # which limit refused: "credential", "recipient" or "address"
    retry_after_s: float = 0.0


ALLOWED = Verdict(allowed=True)


def client_address(request: HttpRequest) -> str | None:
    """The client's IP address: the peer, or with LEASEBOARD_TRUSTED_PROXIES = N the N-th
    X-Forwarded-For entry from the right (what the outermost trusted proxy saw). Entries
    further left are the client's own claims and are never trusted. None when there is no
    valid address. Also django-axes' AXES_CLIENT_IP_CALLABLE, so sign-in throttling counts
    the same address."""
    raw = request.META.get("REMOTE_ADDR") or ""
    hops = settings.LEASEBOARD_TRUSTED_PROXIES
    if hops:
        forwarded = [
            a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if a.strip()
        ]
        if forwarded:
            raw = forwarded[max(0, len(forwarded) - hops)]
    try:
        return str(ipaddress.ip_address(raw))
    except ValueError:
        return None


def bearer_credential(request: HttpRequest) -> str | None:
    """A digest of the bearer token, if the request carries one (no database lookup)."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return hashlib.sha256(token.encode(errors="replace")).hexdigest()


class LocalWindows:
    """Fixed windows in this process's memory (the embedded default runs one web process;
    with several processes and no Redis each counts alone)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._windows: dict[str, list[float]] = {}  # key -> [count, ends at (monotonic)]

    def charge(self, key: str, limit: int, period_s: int) -> tuple[int, float]:
        now = time.monotonic()
        with self._lock:
            window = self._windows.get(key)
            if window is None or window[1] <= now:
                if len(self._windows) >= LOCAL_MAX_WINDOWS:
                    self._prune(now)
                window = [0, now + period_s]
                self._windows[key] = window
            window[0] += 1
            return int(window[0]), (window[1] - now if window[0] > limit else 0.0)

    def _prune(self, now: float) -> None:
        self._windows = {k: w for k, w in self._windows.items() if w[1] > now}
        if len(self._windows) >= LOCAL_MAX_WINDOWS:  # all live: forget rather than grow
            self._windows.clear()


class RedisWindows:
    """Fixed windows in Redis: one EVALSHA per charge, shared by every web process."""

    def __init__(self, url: str) -> None:
        import redis

        self._client = redis.Redis.from_url(
            url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S
        )
        self._script: Any = self._client.register_script(CHARGE_LUA)

    def charge(self, key: str, limit: int, period_s: int) -> tuple[int, float]:
        count, ttl = self._script(keys=[key], args=[period_s, limit])
        return int(count), float(ttl)


class Limiter:
    def __init__(self, redis_url: str) -> None:
        self.redis_url = redis_url
        self.local = LocalWindows()
        self.redis = RedisWindows(redis_url) if redis_url else None
        self._redis_down_until = 0.0

    def _charge(self, key: str, rate: tuple[int, int]) -> tuple[int, float]:
        limit, period_s = rate
        key = f"{KEY_PREFIX}{key}:{limit}/{period_s}"
        if self.redis is not None and time.monotonic() >= self._redis_down_until:
            try:
                return self.redis.charge(key, limit, period_s)
            except Exception as exc:  # any Redis failure: count locally for a while
                self._redis_down_until = time.monotonic() + REDIS_RETRY_AFTER_S
                log.warning("rate limits counted in memory for %ss: %s", REDIS_RETRY_AFTER_S, exc)
        return self.local.charge(key, limit, period_s)

    def _verdict(self, kind: str, key: str, rate: tuple[int, int] | None) -> Verdict:
        if rate is None:
            return ALLOWED
        count, retry_after_s = self._charge(f"{kind}:{key}", rate)
        if count <= rate[0]:
            return ALLOWED
        return Verdict(allowed=False, limit=kind, retry_after_s=max(1.0, retry_after_s))

    def admit(self, *, credential: str | None, address: str, path: str = "") -> Verdict:
        """Charge a request before it runs: to its credential if it has one, else to its
        address."""
        if credential is None:
            return self._verdict("address", address, settings.LEASEBOARD_RATE_LIMIT_ADDRESS)
        if path.startswith(RECIPIENT_PATHS):
            return self._verdict("recipient", credential, settings.LEASEBOARD_RATE_LIMIT_RECIPIENT)
        return self._verdict("credential", credential, settings.LEASEBOARD_RATE_LIMIT_AGENT)

    def refused_credential(self, *, address: str) -> Verdict:
        """Charge a request whose token was refused to its address."""
        return self._verdict("address", address, settings.LEASEBOARD_RATE_LIMIT_ADDRESS)


_limiter: Limiter | None = None
_limiter_lock = threading.Lock()


def limiter() -> Limiter:
    """The process's limiter, rebuilt when the Redis URL changes (tests switch it)."""
    global _limiter
    url = settings.REDIS_URL or (
        settings.CELERY_BROKER_URL if settings.CELERY_BROKER_URL.startswith("redis") else ""
    )
    current = _limiter
    if current is not None and current.redis_url == url:
        return current
    with _limiter_lock:
        if _limiter is None or _limiter.redis_url != url:
            _limiter = Limiter(url)
        return _limiter


def rate_limits_forget() -> None:
    """Drop every in-memory window (tests start each case with fresh budgets)."""
    global _limiter
    with _limiter_lock:
        _limiter = None
