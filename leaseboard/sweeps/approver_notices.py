"""Approvers reached where they are: each effect that waits for approval is sent to its
approvers by e-mail and by a signed webhook whose body a chat tool's incoming webhook
accepts (Slack's `text` + `blocks`), with a link to its decision page; a reminder goes out
before its decide-by time. Targets come from the queue's notification settings:

    Queue.notify["approvals"] = {
        "approvers": ["abe", "group:payments-approvers"],   # users, or every user of a group
        "emails": ["approvals@example.com"],
        "webhooks": [{"url": "https://hooks.slack.com/…", "secret": "…"}],
        "rules": {"refunds": {"approvers": ["group:finance"], "webhooks": [...]}},
    }

A rule's own entry replaces the queue's for the effects that rule held. With no
`approvals` settings, the members of the `approver` group who have an e-mail are asked.

Rows (`ApprovalNotice`) are the outbox and the delivery log: written in the transaction
that made the effect wait, so a committed request is never lost and a rolled-back one
sends nothing; sent after commit by a task, and by the sweep whenever any are due; each
attempt recorded; a webhook retried with backoff until LEASEBOARD_WEBHOOK_MAX_RETRIES.
Nothing here enqueues (leaseboard.sweeps.tasks does); no network I/O in a transaction.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db.models import Exists, F, OuterRef
from django.urls import reverse
from django.utils import timezone

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Effect
from leaseboard.domain.authority import Role
from leaseboard.sweeps.models import ApprovalNotice
from leaseboard.sweeps.notifications import NO_SECRET_ERROR, signed_post

log = logging.getLogger(__name__)

BATCH = 200
GROUP_PREFIX = "group:"


@dataclass
class Targets:
    emails: list[str] = field(default_factory=list)
    webhooks: list[dict[str, str]] = field(default_factory=list)  # {url, secret}


def approval_config(effect: Effect) -> dict[str, Any]:
    """The queue's approval settings, or its rule's own entry for the rule that held it."""
    approvals = (effect.work_item.queue.notify or {}).get("approvals") or {}
    by_rule = (approvals.get("rules") or {}).get(effect.rule_name) if effect.rule_name else None
    if by_rule:
        return dict(by_rule)
    if approvals:
        return {k: v for k, v in approvals.items() if k != "rules"}
    return {"approvers": [f"{GROUP_PREFIX}{Role.APPROVER.value}"]}


def approval_targets(effect: Effect) -> Targets:
    """Named approvers and groups resolved to the e-mail addresses of active users, plus
    the configured addresses and webhooks; each once."""
    config = approval_config(effect)
    names: list[str] = []
    groups: list[str] = []
    for entry in config.get("approvers") or []:
        entry = str(entry)
        (groups if entry.startswith(GROUP_PREFIX) else names).append(
            entry.removeprefix(GROUP_PREFIX)
        )
    users = get_user_model().objects.filter(is_active=True).exclude(email="")
    found = list(users.filter(username__in=names).values_list("email", flat=True))
    found += users.filter(groups__name__in=groups).values_list("email", flat=True)
    emails = [*found, *(str(e) for e in config.get("emails") or [])]
    hooks = [h for h in config.get("webhooks") or [] if isinstance(h, dict) and h.get("url")]
    return Targets(emails=list(dict.fromkeys(emails)), webhooks=hooks)


def approval_notices_open(effect: Effect, kind: str) -> int:
    """One row per target for this effect and kind (an existing row is kept: a repeated
    call opens nothing). Runs in the caller's transaction."""
    targets = approval_targets(effect)
    rows = [
        ApprovalNotice(effect=effect, kind=kind, channel=ApprovalNotice.Channel.EMAIL, target=e)
        for e in targets.emails
    ] + [
        ApprovalNotice(
            effect=effect, kind=kind, channel=ApprovalNotice.Channel.WEBHOOK, target=h["url"]
        )
        for h in targets.webhooks
    ]
    for row in rows:
        row.target = row.target[:500]
    return len(ApprovalNotice.objects.bulk_create(rows, ignore_conflicts=True))


def approval_reminders_open_due(*, batch: int = BATCH) -> int:
    """The sweep's step: a reminder for every waiting effect whose deadline is within
    LEASEBOARD_APPROVAL_REMIND_BEFORE_MS and that has none yet (index effect_decide_by_idx;
    the unique constraint makes a repeated or concurrent step open nothing twice)."""
    now = db_now_ms()
    reminded = ApprovalNotice.objects.filter(
        effect=OuterRef("pk"), kind=ApprovalNotice.Kind.REMINDER
    )
    due = list(
        Effect.objects.filter(
            decision=Effect.Decision.PENDING_APPROVAL,
            decide_by_ms__gt=now,
            decide_by_ms__lte=now + settings.LEASEBOARD_APPROVAL_REMIND_BEFORE_MS,
        )
        .exclude(Exists(reminded))
        .select_related("work_item__queue", "executor")
        .order_by("decide_by_ms")[:batch]
    )
    opened = 0
    for effect in due:
        opened += approval_notices_open(effect, ApprovalNotice.Kind.REMINDER)
    return opened


# -- what is sent --------------------------------------------------------------------------


def decision_url(effect: Effect) -> str:
    return settings.LEASEBOARD_PUBLIC_URL + reverse("takeovers:effect", args=[effect.id])


def _left(effect: Effect, now_ms: int) -> str:
    if effect.decide_by_ms is None:
        return "before its lease ends"
    minutes = max(0, effect.decide_by_ms - now_ms) // 60_000
    seconds = max(0, effect.decide_by_ms - now_ms) // 1000 % 60
    default = "approved" if effect.on_timeout == "approve" else "rejected"
    return f"within {minutes} min {seconds} s (then it is {default} by default)"


def approval_message(effect: Effect, kind: str, *, now_ms: int) -> dict[str, Any]:
    """A Slack-compatible incoming-webhook body: `text` (the notification's fallback) and
    `blocks`: what is asked, exactly (kind, target, payload, digest), and the link."""
    who = effect.executor.name if effect.executor else "?"
    lead = "Reminder: still waiting" if kind == ApprovalNotice.Kind.REMINDER else "Approval asked"
    url = decision_url(effect)
    payload = json.dumps(effect.payload, sort_keys=True, ensure_ascii=False)
    text = (
        f"{lead}: {who} wants {effect.kind} on {effect.target} for work item "
        f"{effect.work_item.key}; decide {_left(effect, now_ms)}: {url}"
    )
    return {
        "text": text,
        "blocks": [
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": (
                        f"*{lead}*: `{who}` wants `{effect.kind}` on `{effect.target}` "
                        f"(work item `{effect.work_item.key}`, epoch {effect.epoch})"
                    ),
                },
            },
            {"type": "section", "text": {"type": "mrkdwn", "text": f"```{payload[:2800]}```"}},
            {
                "type": "context",
                "elements": [
                    {
                        "type": "mrkdwn",
                        "text": f"rule `{effect.rule_name or 'queue default'}` · "
                        f"decide {_left(effect, now_ms)} · {effect.content_digest}",
                    }
                ],
            },
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Open the decision page"},
                        "url": url,
                        "action_id": "leaseboard-decide",
                    }
                ],
            },
        ],
    }


# -- delivery ------------------------------------------------------------------------------


def approval_notices_due_exist() -> bool:
    return ApprovalNotice.objects.filter(
        status=ApprovalNotice.Status.PENDING, due_at__lte=timezone.now()
    ).exists()


def approval_notices_deliver_due(*, limit: int = BATCH) -> bool:
    """Send the due notices, one at a time, outside any transaction. A notice whose effect
    was decided meanwhile is not sent (failed, saying so). True if more were due."""
    due = list(
        ApprovalNotice.objects.select_related("effect__work_item__queue", "effect__executor")
        .filter(status=ApprovalNotice.Status.PENDING, due_at__lte=timezone.now())
        .order_by("id")[:limit]
    )
    now = db_now_ms()
    for notice in due:
        _deliver(notice, now)
    return len(due) == limit


def _deliver(notice: ApprovalNotice, now_ms: int) -> None:
    rows = ApprovalNotice.objects.filter(id=notice.id, status=ApprovalNotice.Status.PENDING)
    effect = notice.effect
    if effect.decision != Effect.Decision.PENDING_APPROVAL:
        rows.update(status=ApprovalNotice.Status.FAILED, last_error="decided before it was sent")
        return
    if notice.channel == ApprovalNotice.Channel.EMAIL:
        _email(notice, rows, now_ms)
        return
    hook = next((h for h in approval_targets(effect).webhooks if h.get("url") == notice.target), {})
    secret = hook.get("secret") or settings.LEASEBOARD_WEBHOOK_SECRET
    if not secret:
        rows.update(status=ApprovalNotice.Status.FAILED, last_error=NO_SECRET_ERROR)
        return
    rows.update(attempts=F("attempts") + 1)
    attempt = notice.attempts + 1
    sent = signed_post(
        notice.target,
        approval_message(effect, notice.kind, now_ms=now_ms),
        secret,
        {"X-Leaseboard-Effect": str(effect.id), "X-Leaseboard-Notice": str(notice.id)},
    )
    sent.record(rows, attempt, ApprovalNotice.Status)


def _email(notice: ApprovalNotice, rows: Any, now_ms: int) -> None:
    # Claim first (pending -> delivered): a concurrent run then sends nothing. A crash
    # between claim and send loses one e-mail rather than sending it twice.
    if not rows.update(
        status=ApprovalNotice.Status.DELIVERED,
        attempts=F("attempts") + 1,
        delivered_at=timezone.now(),
    ):
        return
    effect = notice.effect
    message = approval_message(effect, notice.kind, now_ms=now_ms)
    lead = "Reminder: " if notice.kind == ApprovalNotice.Kind.REMINDER else ""
    subject = f"[leaseboard] {lead}approve {effect.kind} on {effect.target}?"[:200]
    body = "\n".join(
        [
            message["text"],
            "",
            f"Kind:    {effect.kind}",
            f"Target:  {effect.target}",
            f"Digest:  {effect.content_digest}",
            "Payload:",
            json.dumps(effect.payload, sort_keys=True, indent=2, ensure_ascii=False),
            "",
            f"Decide here: {decision_url(effect)}",
        ]
    )
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [notice.target])
    except Exception as exc:  # recorded in the delivery log
        ApprovalNotice.objects.filter(id=notice.id).update(
            status=ApprovalNotice.Status.FAILED, last_error=f"{type(exc).__name__}: {exc}"[:500]
        )
