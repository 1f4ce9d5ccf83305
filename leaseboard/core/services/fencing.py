"""Server side of signed fencing tokens: the signing keys' lifecycle, the key set, signing.

Keys live in the database, so every web process publishes the same key set; their private
halves only sealed under the key-encryption key from the environment (FencingKeyring).
Lifecycle, in database-clock milliseconds (docs/design.md §3):
- rotate: a new key is published at once and signs from now + the publish delay, so
  recipients can fetch it before they meet a token signed by it;
- retire: the key stops signing (in this process at once, in the others within
  KEY_CACHE_SECONDS) and stays published until every token it may have signed has expired.
Each process caches the unsealed keys with their activation times; which key signs is
decided per token from the caller's database-clock `now_ms`, never from this host's clock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import Max, Q

from leaseboard.core.clock import DbNowMs, db_now_ms
from leaseboard.core.models import FencingKey, Lease
from leaseboard.core.models.leases import LIVE_STATES, FencingKeyring, FencingKeyUnavailable
from leaseboard.core.services.audit import audit_record
from leaseboard.domain import fencing
from leaseboard.domain.errors import NotFound, ValidationFailed

log = logging.getLogger(__name__)

# How long a process signs from its copy of the key rows before reading them again. A key
# retired elsewhere may sign here that much longer; retirement's publish window covers it.
KEY_CACHE_SECONDS = 10.0
KEY_CACHE_MS = int(KEY_CACHE_SECONDS * 1000)


class KeyState(StrEnum):
    PENDING = "pending"  # published; signs from activate_at
    SIGNING = "signing"  # the key that signs now
    PUBLISHED = "published"  # activated, superseded by a newer key; its tokens verify
    RETIRING = "retiring"  # signs no more; published until its tokens have expired
    RETIRED = "retired"  # out of the key set


@dataclass(frozen=True)
class _Signer:
    id: int
    kid: str
    private_key: bytes
    activate_at_ms: int


K = TypeVar("K", FencingKey, _Signer)


@dataclass
class _Copy:
    """This process's copy of the unretired keys, unsealed, and when it was read."""

    at: float = 0.0  # time.monotonic(); 0: read again
    signers: tuple[_Signer, ...] = ()


_cache = _Copy()
_cache_lock = threading.Lock()


def signing_key_at(keys: Sequence[K], now_ms: int) -> K | None:
    """The key that signs at `now_ms` among unretired keys: the newest activated one."""
    active = [k for k in keys if k.activate_at_ms <= now_ms]
    return max(active, key=lambda k: (k.activate_at_ms, k.id)) if active else None


def key_state(key: FencingKey, *, now_ms: int, signing_kid: str | None) -> KeyState:
    if key.retired_at_ms is not None:
        assert key.publish_until_ms is not None  # a database constraint
        return KeyState.RETIRING if key.publish_until_ms > now_ms else KeyState.RETIRED
    if key.activate_at_ms > now_ms:
        return KeyState.PENDING
    return KeyState.SIGNING if key.kid == signing_kid else KeyState.PUBLISHED


def _key_create(*, now_ms: int, activate_at_ms: int) -> FencingKey:
    private = fencing.generate_private_key()
    public = fencing.public_key_raw(private)
    kid = fencing.key_id(public)
    sealed, kek_id = FencingKeyring.from_settings().seal(private, kid=kid)
    return FencingKey.objects.create(
        kid=kid,
        public_key=public,
        private_key_sealed=sealed,
        kek_id=kek_id,
        created_at_ms=now_ms,
        activate_at_ms=activate_at_ms,
    )


@transaction.atomic(durable=True)
def fencing_key_rotate(
    *, actor_name: str = "cli", publish_delay_ms: int | None = None
) -> FencingKey:
    """Create a new key: published at once, signing after the publish delay (at once when
    no key signs now: then no recipient can have met a token yet). Older keys keep
    verifying, and the one signing now keeps signing until then; retire them afterwards."""
    delay = (
        settings.LEASEBOARD_FENCING_KEY_PUBLISH_DELAY_MS
        if publish_delay_ms is None
        else publish_delay_ms
    )
    if delay < 0:
        raise ValidationFailed("the publish delay must not be negative", param="publish_delay_ms")
    # Lock the key rows first: a concurrent retire must see this key, or not at all.
    unretired = list(
        FencingKey.objects.select_for_update(no_key=True)
        .filter(retired_at_ms__isnull=True)
        .only("id", "activate_at_ms")
        .order_by("id")
    )
    now = db_now_ms()
    if signing_key_at(unretired, now) is None:
        delay = 0
    key = _key_create(now_ms=now, activate_at_ms=now + delay)
    audit_record(
        at_ms=now,
        actor_name=actor_name,
        actor_role="admin",
        action="fencing_key.rotate",
        object_type="fencing_key",
        object_id=key.kid,
        after={"kid": key.kid, "activate_at_ms": key.activate_at_ms, "kek_id": key.kek_id},
    )
    transaction.on_commit(fencing_keys_forget)
    return key


def longest_token_ms(now_ms: int) -> int:
    """How long a token signed now may stay valid: a lease token lives to its lease's
    lifetime cap, an effect token FENCING_TOKEN_TTL_MS. A queue or item configured beyond
    the defaults is covered by the live leases' own caps."""
    configured = max(
        settings.LEASE_DEFAULTS.max_lifetime_ms,
        settings.LEASEBOARD_TAKEOVER_MAX_STANDING_MS,
        settings.FENCING_TOKEN_TTL_MS,
    )
    live = Lease.objects.filter(state__in=LIVE_STATES).aggregate(m=Max("max_expires_at_ms"))["m"]
    return max(configured, (live or 0) - now_ms)


@transaction.atomic(durable=True)
def fencing_key_retire(
    *, kid: str, actor_name: str = "cli", immediately: bool = False
) -> FencingKey:
    """Stop signing with a key and keep publishing it until every token it may have signed
    has expired; `immediately` drops it from the key set now (a compromised key: its
    tokens stop verifying). The only key that can sign now is never retired."""
    # Every key row locked, in one order: two concurrent retires cannot leave no signer.
    keys = list(FencingKey.objects.select_for_update(no_key=True).order_by("id"))
    now = db_now_ms()
    key = next((k for k in keys if k.kid == kid), None)
    if key is None:
        raise NotFound(f"no fencing key {kid!r}")
    unretired = [k for k in keys if k.retired_at_ms is None]
    signer = signing_key_at(unretired, now)
    before = key_state(key, now_ms=now, signing_kid=signer.kid if signer else None)
    if key.retired_at_ms is not None:
        if not immediately or before == KeyState.RETIRED:
            raise ValidationFailed(f"fencing key {kid} is already {before}")
        key.publish_until_ms = max(now, key.retired_at_ms)
    else:
        others = [k for k in unretired if k is not key and k.activate_at_ms <= now]
        if key is signer and not others:
            pending = sorted((k for k in unretired if k is not key), key=lambda k: k.activate_at_ms)
            then = (
                f"it can be retired once {pending[0].kid} activates, "
                f"in {(pending[0].activate_at_ms - now + 999) // 1000} s"
                if pending
                else "run `fencing_keys rotate` first"
            )
            raise ValidationFailed(
                f"fencing key {kid} is the only key that can sign now, and every grant needs "
                f"one: {then}"
            )
        # A pending key that no process can activate before its copy of the rows refreshes
        # has signed nothing: it leaves the key set at once.
        may_have_signed = key.activate_at_ms <= now + KEY_CACHE_MS
        key.retired_at_ms = now
        key.publish_until_ms = (
            now + KEY_CACHE_MS + longest_token_ms(now)
            if may_have_signed and not immediately
            else now
        )
    key.save(update_fields=["retired_at_ms", "publish_until_ms"])
    after = key_state(key, now_ms=now, signing_kid=None)
    audit_record(
        at_ms=now,
        actor_name=actor_name,
        actor_role="admin",
        action="fencing_key.retire",
        object_type="fencing_key",
        object_id=kid,
        reason="dropped from the key set at once" if immediately else "",
        before={"kid": kid, "state": before.value},
        after={"kid": kid, "state": after.value, "publish_until_ms": key.publish_until_ms},
    )
    transaction.on_commit(fencing_keys_forget)
    return key


@dataclass(frozen=True)
class FencingKeyStatus:
    kid: str
    state: KeyState
    created_at_ms: int
    activate_at_ms: int
    retired_at_ms: int | None
    publish_until_ms: int | None
    kek_id: str
    opens_here: bool  # its key-encryption key is configured in this process


def fencing_keys_status() -> tuple[int, list[FencingKeyStatus]]:
    """(database now, every key with its state), newest activation first."""
    now = db_now_ms()
    keys = list(FencingKey.objects.defer("private_key_sealed").order_by("-activate_at_ms", "-id"))
    signer = signing_key_at([k for k in keys if k.retired_at_ms is None], now)
    keyring = FencingKeyring.from_settings()
    return now, [
        FencingKeyStatus(
            kid=k.kid,
            state=key_state(k, now_ms=now, signing_kid=signer.kid if signer else None),
            created_at_ms=k.created_at_ms,
            activate_at_ms=k.activate_at_ms,
            retired_at_ms=k.retired_at_ms,
            publish_until_ms=k.publish_until_ms,
            kek_id=k.kek_id,
            opens_here=keyring.knows(k.kek_id),
        )
        for k in keys
    ]


def fencing_keys_forget() -> None:
    with _cache_lock:
        _cache.at = 0.0


def _key_bootstrap(signing_at_ms: int | None) -> FencingKey:
    # The first key of an installation, made on first use and active from the signer's
    # `now_ms` (read before this row's clock). Not audited: the JWKS is read by anonymous
    # GETs, and viewing never writes audit rows.
    with transaction.atomic():
        now = db_now_ms()
        log.info("no fencing key yet: creating the first one")
        activate_at = now if signing_at_ms is None else min(now, signing_at_ms)
        return _key_create(now_ms=now, activate_at_ms=activate_at)


def _signers(*, fresh: bool = False, now_ms: int | None = None) -> tuple[_Signer, ...]:
    """Every unretired key, unsealed, from this process's copy (read again when stale)."""
    with _cache_lock:
        if not fresh and _cache.signers and time.monotonic() - _cache.at < KEY_CACHE_SECONDS:
            return _cache.signers
    rows = list(FencingKey.objects.filter(retired_at_ms__isnull=True).order_by("id"))
    # A key made here belongs to the caller's transaction, which may yet roll back: such a
    # copy is used once, never cached.
    cacheable = bool(rows)
    rows = rows or [_key_bootstrap(now_ms)]
    keyring = FencingKeyring.from_settings()
    signers = []
    for row in rows:
        try:
            private = keyring.open(row.private_key_sealed, kid=row.kid, kek_id=row.kek_id)
        except FencingKeyUnavailable as exc:
            log.error("%s; this process signs with the other keys", exc)
            continue
        signers.append(_Signer(row.id, row.kid, private, row.activate_at_ms))
    if not signers:
        raise ImproperlyConfigured(
            "no fencing key opens with this process's LEASEBOARD_FENCING_KEK (or "
            "LEASEBOARD_FENCING_RETIRED_KEKS): set the key-encryption key the keys were "
            "sealed under (`manage.py fencing_keys list` shows each key's KEK id)"
        )
    if cacheable:
        with _cache_lock:
            _cache.at, _cache.signers = time.monotonic(), tuple(signers)
    return tuple(signers)


def _signer_at(now_ms: int) -> _Signer:
    signer = signing_key_at(_signers(now_ms=now_ms), now_ms)
    if signer is None:
        signers = _signers(fresh=True, now_ms=now_ms)
        signer = signing_key_at(signers, now_ms)
        if signer is None:  # only if the database clock went back past every activation
            signer = min(signers, key=lambda s: (s.activate_at_ms, s.id))
            log.warning("no fencing key is active yet; signing with %s early", signer.kid)
    return signer


def fencing_public_keys() -> dict[str, bytes]:
    """The published key set, read fresh from the database: a pending key is in it before
    it signs, a retiring one until its tokens have expired (publish_until, database clock)."""
    published = FencingKey.objects.filter(
        Q(publish_until_ms__isnull=True) | Q(publish_until_ms__gt=DbNowMs())
    ).values_list("kid", "public_key")
    keys = {kid: bytes(public) for kid, public in published}
    if not keys:
        _signers(fresh=True)  # an empty installation: its first key
        keys = {kid: bytes(public) for kid, public in published.all()}
    return keys


def fencing_token_issue(
    *,
    work_key: str,
    epoch: int,
    lease_id: str,
    holder: str,
    now_ms: int,
    expires_at_ms: int,
    effect_id: str | None = None,
    digest: str | None = None,
    queue: str | None = None,
    policy_version: int | None = None,
    generation: int = 0,
) -> str:
    """Sign a lease's (or one effect's) standing with the key active at `now_ms`, which
    must be the database clock's time. Every token names the work item's `queue`; an
    effect's token carries `digest`, the content it was decided on, and the queue's
    `policy_version` it was decided under (a recipient may accept a kind only from a
    queue, docs/design.md §9). `generation` is the lease's (docs/design.md §5): the token's
    fencing order is (generation, epoch)."""
    signer = _signer_at(now_ms)
    # deliberate: the claims named field by field (leaseboard_recipient.tokens.FencingClaims).
    claims = fencing.FencingClaims(
        work_key=work_key,
        epoch=epoch,
        lease_id=lease_id,
        holder=holder,
        issued_at_ms=now_ms,
        expires_at_ms=expires_at_ms,
        kid=signer.kid,
        effect_id=effect_id,
        digest=digest,
        queue=queue,
        policy_version=policy_version,
        generation=generation,
    )
    return fencing.sign_token(claims, private_key_raw=signer.private_key)
