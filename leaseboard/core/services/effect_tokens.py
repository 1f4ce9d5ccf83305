"""An authorized effect's fencing token and the digest of what it asks: the token dies
with the standing it proves, and names the effect, its content and its policy version."""

from __future__ import annotations

from django.conf import settings

from leaseboard.core.models import Effect, Lease, WorkItem
from leaseboard.core.services.fencing import fencing_token_issue
from leaseboard.domain.fencing import content_digest, token_expiry_ms


def effect_token_issue(
    effect: Effect, lease: Lease, item: WorkItem, now_ms: int, *, queue: str
) -> str:
    """The effect's token, dying with the standing it proves: at the lease's expiry at the
    moment of issue (a renewal does not stretch it). Its expiry is kept on the effect: a
    successor waits for it while the outcome is unknown (the fence). It names the work
    item's `queue` and the policy version the effect was decided under."""
    effect.token_expires_at_ms = token_expiry_ms(
        lease_expires_at_ms=lease.expires_at_ms,
        now_ms=now_ms,
        max_ttl_ms=settings.FENCING_TOKEN_TTL_MS,
    )
    return fencing_token_issue(
        work_key=item.key,
        epoch=lease.epoch,
        generation=lease.generation,
        lease_id=str(lease.id),
        holder=effect.executor.name if effect.executor else "",
        now_ms=now_ms,
        expires_at_ms=effect.token_expires_at_ms,
        effect_id=str(effect.id),
        digest=effect.content_digest or effect_digest(effect),
        queue=queue,
        policy_version=effect.policy_version,
    )


def effect_digest(effect: Effect) -> str:
    """The digest of what the effect asks: set on the row once, when it is proposed."""
    if not effect.content_digest:
        effect.content_digest = content_digest(effect.kind, effect.target, effect.payload)
    return effect.content_digest
