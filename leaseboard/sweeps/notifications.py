"""Alert notifications: webhook (HMAC-signed JSON, retried with backoff) and e-mail through
Django's mail backend; and recipients' epoch-advance notices, sent the same signed way
(`epoch_notices_deliver_due`, batched per recipient, logged on core's EpochNotice rows).
Alert targets come from the alert's queue (`Queue.notify`):

    {"webhooks": [{"url": "https://…", "secret": "…"}], "emails": ["ops@example.com"],
     "kinds": ["jeopardy", "expired"]}          # "kinds" optional: all kinds by default

A hook without its own secret is signed with LEASEBOARD_WEBHOOK_SECRET; with neither, its
delivery fails with a clear error and nothing is sent.

Every (alert, channel, target) has one NotificationDelivery row, the delivery log and the
idempotency key: a redelivered task finds it delivered and sends nothing. No network I/O
happens inside a database transaction. Nothing here enqueues: leaseboard.sweeps.tasks calls
these and enqueues what they return (tasks import services, never the other way round).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import random
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from leaseboard.core.models import Alert, EpochNotice, Queue
from leaseboard.core.services.epoch_notices import epoch_notices_payload
from leaseboard.domain.targets import email_problem
from leaseboard.sweeps import outbound
from leaseboard.sweeps.models import NotificationDelivery

SIGNATURE_HEADER = "X-Leaseboard-Signature"
NO_SECRET_ERROR = "no webhook secret: set LEASEBOARD_WEBHOOK_SECRET or the hook's own secret"

log = logging.getLogger(__name__)


def alert_payload(alert: Alert) -> dict[str, Any]:
    return {
        "id": alert.id,
        "kind": alert.kind,
        "message": alert.message,
        "lease_id": str(alert.lease_id) if alert.lease_id else None,
        "work_key": alert.work_item.key if alert.work_item_id else None,  # type: ignore[union-attr]
        "epoch": alert.epoch,
        "due_at_ms": alert.due_at_ms,
        "opened_at_ms": alert.opened_at_ms,
        "detail": alert.detail,
    }


def sign(body: bytes, secret: str, timestamp: int) -> str:
    """`t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>." + body>`; the timestamp in the MAC
    lets a receiver refuse replays."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def verify(body: bytes, header: str, secret: str, *, tolerance_s: int = 300) -> bool:
    """What a receiver runs: check the MAC and the timestamp's freshness."""
    try:
        parts = dict(p.split("=", 1) for p in header.split(","))
        timestamp = int(parts["t"])
    except (ValueError, KeyError):
        return False
    if abs(time.time() - timestamp) > tolerance_s:
        return False
    return hmac.compare_digest(sign(body, secret, timestamp), header)


def notify_targets(notify: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    """The configured targets for an alert kind (Queue.notify or the default)."""
    config = notify or settings.LEASEBOARD_NOTIFY_DEFAULT or {}
    kinds = config.get("kinds")
    if kinds and kind not in kinds:
        return {}
    return {k: v for k, v in config.items() if k in ("webhooks", "emails") and v}


def alerts_with_targets(alert_ids: list[int]) -> list[int]:
    """The alerts among `alert_ids` whose queue (or the default) has notification targets."""
    if not alert_ids:
        return []
    # The queues that configure targets, each read (and decoded) once: a sweep batch opens
    # hundreds of alerts on a handful of queues, and where neither a queue nor the default
    # names a target (the common case) the alerts need not be read at all.
    notify = dict(Queue.objects.exclude(notify={}).values_list("id", "notify"))
    if not notify and not settings.LEASEBOARD_NOTIFY_DEFAULT:
        return []
    rows = (
        Alert.objects.filter(id__in=alert_ids)
        .annotate(about_queue=Coalesce("work_item__queue_id", "queue_id"))
        .values_list("id", "kind", "about_queue")
    )
    return [aid for aid, kind, queue_id in rows if notify_targets(notify.get(queue_id), kind)]


def _config(alert: Alert) -> dict[str, Any]:
    # An alert's queue is its work item's; a burst incident's is its own (Alert.queue).
    queue = alert.work_item.queue if alert.work_item_id else alert.queue  # type: ignore[union-attr]
    notify = queue.notify if queue is not None else None
    return notify_targets(notify, alert.kind)


def alert_deliveries_pending(*, alert_id: int) -> list[NotificationDelivery]:
    """Create the delivery rows for an alert, one per target, and return those still to
    send; a fan-out repeated after its deliveries were sent returns none."""
    alert = Alert.objects.select_related("work_item__queue", "queue").filter(id=alert_id).first()
    if alert is None:
        return []
    config = _config(alert)
    webhook, email = NotificationDelivery.Channel.WEBHOOK, NotificationDelivery.Channel.EMAIL
    targets = [(webhook, hook["url"]) for hook in config.get("webhooks", []) if hook.get("url")]
    targets += [(email, address) for address in config.get("emails", []) if address]
    pending = []
    for channel, target in targets:
        try:
            with transaction.atomic():
                delivery, created = NotificationDelivery.objects.get_or_create(
                    alert=alert, channel=channel, target=target[:500]
                )
        except IntegrityError:
            delivery = NotificationDelivery.objects.get(alert=alert, channel=channel, target=target)
        if delivery.status == NotificationDelivery.Status.PENDING:
            pending.append(delivery)
    return pending


def backoff_s(attempt: int) -> float:
    """Exponential backoff with jitter ("equal jitter"), capped at 10 minutes: at least half
    the step, so a failing target is never tried again at once, and spread over the other
    half, so targets that failed together are not retried together."""
    step = min(600.0, 2.0 ** min(attempt, 10))
    return step / 2 + random.uniform(0, step / 2)


REMOVED = "not sent: the target was removed from the configuration"


def webhook_deliver(*, delivery_id: int) -> float | None:
    """POST the signed payload once. Returns seconds to wait before a retry, or None when
    the delivery is done (delivered, given up as a dead letter, or no longer owed)."""
    delivery = (
        NotificationDelivery.objects.select_related("alert__work_item__queue", "alert__queue")
        .filter(id=delivery_id)
        .first()
    )
    if delivery is None or delivery.status != NotificationDelivery.Status.PENDING:
        return None
    alert = delivery.alert
    rows = NotificationDelivery.objects.filter(
        id=delivery.id, status=NotificationDelivery.Status.PENDING
    )
    hook: dict[str, Any] | None = next(
        (h for h in _config(alert).get("webhooks", []) if h.get("url") == delivery.target), None
    )
    if hook is None:  # removed (or moved) since the alert fanned out: owed no more
        rows.update(status=NotificationDelivery.Status.FAILED, last_error=REMOVED)
        return None
    secret = hook.get("secret") or settings.LEASEBOARD_WEBHOOK_SECRET
    if not secret:
        # Never unsigned, never signed with SECRET_KEY: fail the delivery, naming the fix.
        rows.update(status=NotificationDelivery.Status.DEAD, last_error=NO_SECRET_ERROR)
        log.error("webhook delivery %s not sent: %s", delivery.id, NO_SECRET_ERROR)
        return None
    # Claim the attempt: a duplicate task for this delivery (a redelivery, a retry racing
    # the first) finds the attempt count moved and sends nothing.
    if not rows.filter(attempts=delivery.attempts).update(attempts=F("attempts") + 1):
        return None
    attempt = delivery.attempts + 1
    sent = signed_post(
        delivery.target,
        alert_payload(alert),
        secret,
        {"X-Leaseboard-Alert": str(alert.id), "X-Leaseboard-Delivery": str(delivery.id)},
    )
    if sent.ok:
        rows.update(
            status=NotificationDelivery.Status.DELIVERED,
            last_status_code=sent.status_code,
            last_error="",
            delivered_at=timezone.now(),
        )
        return None
    give_up = sent.give_up(attempt)
    rows.update(
        status=NotificationDelivery.Status.DEAD if give_up else NotificationDelivery.Status.PENDING,
        last_status_code=sent.status_code,
        last_error=sent.error[:500],
    )
    return None if give_up else backoff_s(attempt)


@dataclass(frozen=True)
class Sent:
    ok: bool
    status_code: int | None
    error: str
    permanent: bool = False  # refused by the outbound policy, or not a URL at all

    def give_up(self, attempt: int) -> bool:
        """Stop after the retry budget, on a 4xx that retrying will not change, or on a
        refusal that no retry changes."""
        code = self.status_code
        return (
            self.permanent
            or attempt > settings.LEASEBOARD_WEBHOOK_MAX_RETRIES
            or (code is not None and 400 <= code < 500 and code not in (408, 429))
        )

    def record(self, rows: Any, attempt: int, status: Any) -> None:
        """Write this attempt's outcome on an outbox's claimed `rows` (a queryset of rows
        with status, last_status_code, last_error, delivered_at and due_at; `status` their
        choices with DELIVERED, DEAD and PENDING): delivered, given up (a dead letter), or
        due again after the backoff (exponential, jittered)."""
        if self.ok:
            rows.update(
                status=status.DELIVERED,
                last_status_code=self.status_code,
                last_error="",
                delivered_at=timezone.now(),
            )
            return
        rows.update(
            status=status.DEAD if self.give_up(attempt) else status.PENDING,
            last_status_code=self.status_code,
            last_error=self.error[:500],
            due_at=timezone.now() + timedelta(seconds=backoff_s(attempt)),
        )


def signed_post(url: str, payload: dict[str, Any], secret: str, headers: dict[str, str]) -> Sent:
    """POST `payload` as compact JSON signed with `secret` (SIGNATURE_HEADER); one attempt,
    never inside a database transaction, under the outbound policy (sweeps.outbound).
    Never raises: whatever goes wrong with one target is that target's Sent."""
    body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
    all_headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: sign(body, secret, int(time.time())),
        **headers,
    }
    answer = outbound.post(url, content=body, headers=all_headers)
    code = answer.status_code
    ok = code is not None and 200 <= code < 300
    error = answer.error or ("" if ok else f"HTTP {code}")
    return Sent(ok, code, error, permanent=answer.permanent)


def email_claimed(rows: Any, target: str, status: Any) -> bool:
    """Claim an e-mail row before its one send (pending -> delivered), so a concurrent or
    redelivered run sends nothing; a crash between claim and send loses one e-mail rather
    than sending it twice. False if the address cannot be mailed (the row dead, saying
    why) or another run claimed the row first."""
    problem = email_problem(target)
    if problem:
        rows.update(status=status.DEAD, last_error=f"not sent: {problem}")
        return False
    return bool(
        rows.update(
            status=status.DELIVERED, attempts=F("attempts") + 1, delivered_at=timezone.now()
        )
    )


def email_deliver(*, delivery_id: int) -> None:
    delivery = (
        NotificationDelivery.objects.select_related("alert__work_item__queue", "alert__queue")
        .filter(id=delivery_id, status=NotificationDelivery.Status.PENDING)
        .first()
    )
    if delivery is None:
        return
    rows = NotificationDelivery.objects.filter(
        id=delivery_id, status=NotificationDelivery.Status.PENDING
    )
    alert = delivery.alert
    if delivery.target not in (_config(alert).get("emails") or []):
        rows.update(status=NotificationDelivery.Status.FAILED, last_error=REMOVED)
        return
    if not email_claimed(rows, delivery.target, NotificationDelivery.Status):
        return
    # The subject is ours alone: an alert's message quotes agents' names and effect kinds,
    # and a header carries nothing an agent chose (a line break in one was a BadHeaderError
    # that left the alert untold).
    subject = f"[leaseboard] {alert.kind} alert #{alert.id}"
    body = "\n".join(
        [
            f"Leaseboard opened a {alert.kind} alert (#{alert.id}).",
            "",
            json.dumps(alert_payload(alert), indent=2, sort_keys=True),
        ]
    )
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [delivery.target])
    except Exception as exc:  # recorded in the delivery log, shown to operators
        NotificationDelivery.objects.filter(id=delivery_id).update(
            status=NotificationDelivery.Status.DEAD,
            last_error=f"{type(exc).__name__}: {exc}"[:500],
        )


EPOCH_NOTICE_BATCH = 500


def epoch_notices_due_exist() -> bool:
    return EpochNotice.objects.filter(
        status=EpochNotice.Status.PENDING, due_at__lte=timezone.now()
    ).exists()


def epoch_notices_deliver_due(*, limit: int = EPOCH_NOTICE_BATCH) -> bool:
    """Tell recipients the new epochs of their due notices: one POST per recipient for the
    whole batch, signed with that recipient's own webhook secret, the attempt logged on
    every row. A failed batch is tried again after a backoff (`due_at`) by a later run,
    until LEASEBOARD_WEBHOOK_MAX_RETRIES; a 4xx other than 408/429 fails it for good, as
    does a webhook cleared since. Two runs racing may send a notice twice, which is
    harmless: raising a mark to an epoch it already has changes nothing. Returns True when
    more notices were due than one batch takes."""
    now = timezone.now()
    due = list(
        EpochNotice.objects.select_related("recipient", "work_item")
        .filter(status=EpochNotice.Status.PENDING, due_at__lte=now)
        .order_by("id")[:limit]
    )
    by_recipient: dict[int, list[EpochNotice]] = {}
    for notice in due:
        by_recipient.setdefault(notice.recipient_id, []).append(notice)
    for notices in by_recipient.values():
        try:
            _epoch_notices_send(notices)
        except Exception:  # one recipient's failure never holds up another's notices
            log.exception("epoch notices to recipient %s", notices[0].recipient_id)
    return len(due) == limit


def _epoch_notices_send(notices: list[EpochNotice]) -> None:
    recipient = notices[0].recipient
    rows = EpochNotice.objects.filter(
        id__in=[n.id for n in notices], status=EpochNotice.Status.PENDING
    )
    if not recipient.webhook_url or not recipient.is_active:
        rows.update(status=EpochNotice.Status.FAILED, last_error="webhook no longer registered")
        return
    rows.update(attempts=F("attempts") + 1)
    attempt = max(n.attempts for n in notices) + 1
    sent = signed_post(
        recipient.webhook_url,
        epoch_notices_payload(notices),
        recipient.webhook_secret,
        {"X-Leaseboard-Epoch-Notices": str(len(notices))},
    )
    sent.record(rows, attempt, EpochNotice.Status)
