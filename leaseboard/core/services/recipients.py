"""Recipients as principals (docs/design.md §5): their credentials (created, rotated, revoked,
audited; printed once, stored hashed), their epoch-advance webhook, and the refusals they
report, kept in the work item's effect history with one counted alert per incident
(work item, recipient, reason).
"""

from __future__ import annotations

import secrets
import uuid

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F

from leaseboard.core.authority import Actor, authorize
from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Alert, Effect, Lease, Recipient, WorkItem
from leaseboard.core.models.executors import hash_token
from leaseboard.core.services.alerts import alerts_open
from leaseboard.core.services.audit import audit_admin
from leaseboard.core.services.executors import token_cleared
from leaseboard.core.tracing import current_trace_id
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import NotFound, ValidationFailed
from leaseboard.domain.targets import webhook_url_problem

RECIPIENT_TOKEN_PREFIX = "lbr_"
WEBHOOK_SECRET_PREFIX = "whsec_"


def _audit(
    action: str,
    recipient: Recipient,
    actor_name: str,
    before: dict[str, object] | None,
    after: dict[str, object],
) -> None:
    """One audit row, before -> after (before is None for a creation), named by the
    recipient's name on both sides."""
    audit_admin(
        action,
        "recipient",
        recipient.id,
        actor_name=actor_name,
        before=None if before is None else {"name": recipient.name, **before},
        after={"name": recipient.name, **after},
    )


def _new_token() -> str:
    return RECIPIENT_TOKEN_PREFIX + secrets.token_urlsafe(32)


@transaction.atomic(durable=True)
def recipient_create(*, name: str, actor_name: str = "cli") -> tuple[Recipient, str]:
    """A new recipient and its credential (returned once; only the hash is kept)."""
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise ValidationFailed("a recipient name is 1 to 100 characters", param="name")
    token = _new_token()
    try:
        with transaction.atomic():
            recipient = Recipient.objects.create(name=name, token_hash=hash_token(token))
    except IntegrityError:
        raise ValidationFailed(f"a recipient named {name!r} already exists", param="name") from None
    _audit("recipient.create", recipient, actor_name, None, {"has_token": True})
    return recipient, token


def _recipient_locked(name: str) -> Recipient:
    recipient = Recipient.objects.select_for_update(no_key=True).filter(name=name.strip()).first()
    if recipient is None:
        raise NotFound(f"no recipient named {name!r}")
    return recipient


@transaction.atomic(durable=True)
def recipient_token_rotate(*, name: str, actor_name: str = "cli") -> tuple[Recipient, str]:
    """A new credential (returned once); the old one is refused from the commit on."""
    recipient = _recipient_locked(name)
    had = recipient.token_hash is not None
    token = _new_token()
    recipient.token_hash = hash_token(token)
    recipient.save(update_fields=["token_hash"])
    _audit("recipient.token_rotate", recipient, actor_name, {"has_token": had}, {"has_token": True})
    return recipient, token


@transaction.atomic(durable=True)
def recipient_token_revoke(*, name: str, actor_name: str = "cli") -> bool:
    """Remove the credential; False (nothing recorded) when there was none."""
    recipient = _recipient_locked(name)
    if not token_cleared(recipient):
        return False
    _audit(
        "recipient.token_revoke", recipient, actor_name, {"has_token": True}, {"has_token": False}
    )
    return True


def webhook_url_checked(url: str) -> str:
    """The URL, or ValidationFailed saying why not (`http://[::1` was a 500, issue 33)."""
    url = (url or "").strip()
    problem = webhook_url_problem(url, settings.LEASEBOARD_WEBHOOK_ALLOW_NETWORKS)
    if problem:
        raise ValidationFailed(f"webhook URL: {problem}", param="url")
    return url


@transaction.atomic(durable=True)
def recipient_webhook_set(*, name: str, url: str, actor_name: str = "cli") -> str:
    """Register (or move) the recipient's epoch-advance webhook with a new signing secret,
    returned once. Grants from the commit on write a notice for it."""
    url = webhook_url_checked(url)
    recipient = _recipient_locked(name)
    secret = WEBHOOK_SECRET_PREFIX + secrets.token_urlsafe(32)
    before = recipient.webhook_url
    recipient.webhook_url, recipient.webhook_secret = url, secret
    recipient.save(update_fields=["webhook_url", "webhook_secret"])
    _audit(
        "recipient.webhook_set",
        recipient,
        actor_name,
        {"webhook_url": before},
        {"webhook_url": url},
    )
    return secret


@transaction.atomic(durable=True)
def recipient_webhook_clear(*, name: str, actor_name: str = "cli") -> bool:
    recipient = _recipient_locked(name)
    if not recipient.webhook_url:
        return False
    before = recipient.webhook_url
    recipient.webhook_url, recipient.webhook_secret = "", ""
    recipient.save(update_fields=["webhook_url", "webhook_secret"])
    _audit(
        "recipient.webhook_clear",
        recipient,
        actor_name,
        {"webhook_url": before},
        {"webhook_url": ""},
    )
    return True


def recipient_for_token(token: str) -> Recipient | None:
    """The active recipient a credential belongs to. Not cached: a rotated or revoked
    credential is refused from the commit on, everywhere."""
    if not token or len(token) > 200 or not token.startswith(RECIPIENT_TOKEN_PREFIX):
        return None
    return Recipient.objects.filter(token_hash=hash_token(token), is_active=True).first()


# -- refusal reports ------------------------------------------------------------------


def _incident_counted(alert: Alert) -> None:
    """Count one more occurrence of the incident the alert stands for, opening it the
    first time. Race-safe without locks: the insert skips an existing key, the update
    re-reads the row it changes."""
    changes = {
        "occurrences": F("occurrences") + 1,
        "message": alert.message,
        "detail": alert.detail,
    }
    if Alert.objects.filter(dedupe_key=alert.dedupe_key).update(**changes):
        return
    if not alerts_open([alert]):  # a concurrent report opened it first
        Alert.objects.filter(dedupe_key=alert.dedupe_key).update(**changes)


@transaction.atomic(durable=True)
def recipient_report_record(
    *,
    actor: Actor,
    work_key: str,
    reason: str,
    epoch: int | None = None,
    high_water: int | None = None,
    detail: str = "",
    token: str | None = None,
) -> Effect:
    """A recipient's guard refused an effect (stale epoch, forged, expired or effect-less
    token): keep it in the work item's effect history, under the recipient's own name
    (from its credential, never from the body), and count it in one alert per incident."""
    authorize(Act.FILE_RECIPIENT_REPORT, actor)
    item = WorkItem.objects.filter(key=work_key).first()
    if item is None:
        raise NotFound(f"no work item {work_key!r}")
    now = db_now_ms()
    lease = Lease.objects.filter(work_item=item, epoch=epoch).first() if epoch else None
    recipient = actor.name
    effect = Effect.objects.create(
        work_item=item,
        lease=lease,
        executor=None,
        source=Effect.Source.RECIPIENT,
        epoch=epoch or 0,
        current_epoch=item.epoch,
        kind=f"recipient.{reason}",
        target=recipient,
        idempotency_key=f"recipient-report:{uuid.uuid4()}",
        payload={"high_water": high_water, "token": (token or "")[:200]},
        decision=Effect.Decision.REFUSED,
        refusal_code=reason,
        refusal_detail=(detail or f"{recipient} refused epoch {epoch} ({reason})")[:500],
        proposed_at_ms=now,
        decided_at_ms=now,
        trace_id=current_trace_id(),
    )
    _incident_counted(
        Alert(
            kind=Alert.Kind.RECIPIENT_REFUSAL,
            dedupe_key=f"recipient:{item.id}:{recipient}:{reason}"[:200],
            lease=lease,
            work_item=item,
            epoch=epoch,
            message=(
                f"{recipient} refused effects on {item.key} ({reason}); latest at epoch "
                f"{epoch}, current epoch {item.epoch}"
            )[:500],
            detail={
                "recipient": recipient,
                "reason": reason,
                "last_effect_id": str(effect.id),
                "last_epoch": epoch,
                "high_water": high_water,
                "last_at_ms": now,
            },
            due_at_ms=now,
            opened_at_ms=now,
        )
    )
    return effect
