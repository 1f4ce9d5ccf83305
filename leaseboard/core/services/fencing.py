"""Server side of signed fencing tokens: key storage, rotation, signing.

Keys live in the database so every web process signs with the same key and publishes the
same key set. A short in-process cache avoids a query per grant; it only ever holds a copy
of database rows, refreshed every KEY_CACHE_SECONDS.
"""

from __future__ import annotations

import threading
import time

from django.db import transaction
from django.utils import timezone

from leaseboard.core.models import FencingKey
from leaseboard.domain import fencing

KEY_CACHE_SECONDS = 10.0
_cache_lock = threading.Lock()
_cache: dict[str, object] = {"at": 0.0, "signing": None, "public": {}}


def fencing_key_rotate() -> FencingKey:
    """Create a new signing key; older keys keep verifying until retired."""
    private = fencing.generate_private_key()
    public = fencing.public_key_raw(private)
    with transaction.atomic():
        key = FencingKey.objects.create(
            kid=fencing.key_id(public), private_key=private, public_key=public
        )
    fencing_keys_forget()
    return key


def fencing_key_retire(kid: str) -> None:
    FencingKey.objects.filter(kid=kid, retired_at__isnull=True).update(retired_at=timezone.now())
    fencing_keys_forget()


def fencing_keys_forget() -> None:
    with _cache_lock:
        _cache["at"] = 0.0


def _load() -> tuple[tuple[str, bytes], dict[str, bytes]]:
    with _cache_lock:
        if time.monotonic() - float(_cache["at"]) < KEY_CACHE_SECONDS and _cache["signing"]:
            return _cache["signing"], _cache["public"]  # type: ignore[return-value]
    keys = list(FencingKey.objects.filter(retired_at__isnull=True).order_by("-created_at", "-id"))
    if not keys:
        keys = [fencing_key_rotate()]
    signing = (keys[0].kid, bytes(keys[0].private_key))
    public = {k.kid: bytes(k.public_key) for k in keys}
    with _cache_lock:
        _cache.update(at=time.monotonic(), signing=signing, public=public)
    return signing, public


def fencing_public_keys() -> dict[str, bytes]:
    """The published key set, read fresh: a key another process just created must verify
    at once, even before this process's signing cache refreshes."""
    _load()  # makes sure at least one key exists
    return {
        k.kid: bytes(k.public_key)
        for k in FencingKey.objects.filter(retired_at__isnull=True).only("kid", "public_key")
    }


def fencing_token_issue(
    *,
    work_key: str,
    epoch: int,
    lease_id: str,
    holder: str,
    now_ms: int,
    expires_at_ms: int,
    effect_id: str | None = None,
) -> str:
    (kid, private), _ = _load()
    claims = fencing.FencingClaims(
        work_key=work_key,
        epoch=epoch,
        lease_id=lease_id,
        holder=holder,
        issued_at_ms=now_ms,
        expires_at_ms=expires_at_ms,
        kid=kid,
        effect_id=effect_id,
    )
    return fencing.sign_token(claims, private_key_raw=private)
