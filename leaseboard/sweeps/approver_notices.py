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
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db.models import Exists, F, OuterRef
from django.urls import reverse
from django.utils import timezone

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Effect
from leaseboard.core.services.approvals import effect_approver_reached
from leaseboard.domain.authority import Role
from leaseboard.sweeps.models import ApprovalNotice
from leaseboard.sweeps.notifications import (
    NO_SECRET_ERROR,
    REMOVED,
    backoff_s,
    email_claimed,
    signed_post,
)

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


def mrkdwn_escaped(text: str) -> str:
    """Slack's three control characters, escaped: no `<url|label>` link, no mention."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _plain(text: str) -> dict[str, Any]:
    # plain_text is never parsed: no links, no formatting, no code span to break out of.
    return {"type": "plain_text", "text": text[:2900] or " ", "emoji": False}


def approval_message(effect: Effect, kind: str, *, now_ms: int) -> dict[str, Any]:
    """A Slack-compatible incoming-webhook body: `text` (the notification's fallback) and
    `blocks`: what is asked, exactly (kind, target, payload, digest), and the link.

    Everything the agent chose (its name, the kind, the target, the work key, the payload)
    appears only in plain_text objects, which Slack shows as written; the mrkdwn parts
    carry only our words, the queue's and rule's names (an admin's) and our own link, so
    an agent cannot add a link, a mention or formatting to the signed message (issue 33)."""
    who = effect.executor.name if effect.executor else "?"
    lead = "Reminder: still waiting" if kind == ApprovalNotice.Kind.REMINDER else "Approval asked"
    url = decision_url(effect)
    queue = effect.work_item.queue.name
    payload = json.dumps(effect.payload, sort_keys=True, ensure_ascii=False)
    left = _left(effect, now_ms)
    text = mrkdwn_escaped(f"{lead} in queue {queue}: an effect waits; decide {left}") + (
        f" <{url}|Open the decision page>"
    )
    asked = (
        f"{who} wants {effect.kind} on {effect.target} (work item {effect.work_item.key}, "
        f"epoch {effect.epoch})"
    )
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{mrkdwn_escaped(lead)}*"}},
            {"type": "section", "text": _plain(asked)},
            {"type": "section", "text": _plain(f"payload: {payload}")},
            {
                "type": "context",
                "elements": [
                    {
                        "type": "mrkdwn",
                        "text": mrkdwn_escaped(
                            f"queue {queue} · rule {effect.rule_name or 'queue default'} · "
                            f"decide {left} · {effect.content_digest}"
                        ),
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
        try:
            _deliver(notice, now)
        except Exception:  # one target's failure never holds up another's notice
            log.exception("approval notice %s", notice.id)
            ApprovalNotice.objects.filter(
                id=notice.id, status=ApprovalNotice.Status.PENDING
            ).update(due_at=timezone.now() + timedelta(seconds=backoff_s(notice.attempts + 1)))
    return len(due) == limit


def _deliver(notice: ApprovalNotice, now_ms: int) -> None:
    rows = ApprovalNotice.objects.filter(id=notice.id, status=ApprovalNotice.Status.PENDING)
    effect = notice.effect
    if effect.decision != Effect.Decision.PENDING_APPROVAL:
        rows.update(status=ApprovalNotice.Status.FAILED, last_error="decided before it was sent")
        return
    targets = approval_targets(effect)
    if notice.channel == ApprovalNotice.Channel.EMAIL:
        if notice.target not in targets.emails:
            rows.update(status=ApprovalNotice.Status.FAILED, last_error=REMOVED)
            return
        _email(notice, rows, now_ms)
        return
    hook = next((h for h in targets.webhooks if h.get("url") == notice.target), None)
    if hook is None:  # removed from the queue's settings since the notice was written
        rows.update(status=ApprovalNotice.Status.FAILED, last_error=REMOVED)
        return
    secret = hook.get("secret") or settings.LEASEBOARD_WEBHOOK_SECRET
    if not secret:
        rows.update(status=ApprovalNotice.Status.DEAD, last_error=NO_SECRET_ERROR)
        return
    # Claim the attempt before sending: a run racing this one (the sweep's and the
    # commit's wake-up) finds the row not due and sends nothing. If this process dies
    # mid-send, the row is due again after the claim and is sent again (at least once;
    # X-Leaseboard-Notice lets a receiver drop the repeat).
    claim = timezone.now() + timedelta(seconds=settings.LEASEBOARD_WEBHOOK_TIMEOUT_S * 2 + 30)
    if not rows.filter(due_at__lte=timezone.now(), attempts=notice.attempts).update(
        attempts=F("attempts") + 1, due_at=claim
    ):
        return
    attempt = notice.attempts + 1
    sent = signed_post(
        notice.target,
        approval_message(effect, notice.kind, now_ms=now_ms),
        secret,
        {"X-Leaseboard-Effect": str(effect.id), "X-Leaseboard-Notice": str(notice.id)},
    )
    sent.record(rows, attempt, ApprovalNotice.Status)
    if sent.ok:
        effect_approver_reached(effect_id=effect.id)


def _email(notice: ApprovalNotice, rows: Any, now_ms: int) -> None:
    effect = notice.effect
    if not email_claimed(rows, notice.target, ApprovalNotice.Status):
        return
    lead = "Reminder: " if notice.kind == ApprovalNotice.Kind.REMINDER else ""
    # Headers carry only our words and the queue's and rule's names (an admin's): the
    # agent's target with "\nBcc: ..." was a BadHeaderError and no approver was told.
    rule = effect.rule_name or "queue default"
    subject = f"[leaseboard] {lead}approval asked in {effect.work_item.queue.name} ({rule})"
    quoted = lambda value: json.dumps(value, ensure_ascii=False)  # noqa: E731 - one line per value
    body = "\n".join(
        [
            f"{'Reminder: still waiting' if lead else 'Approval asked'}: an effect waits for "
            f"your decision; decide {_left(effect, now_ms)}.",
            "",
            "What the agent asked (its own words, quoted):",
            f"Agent:     {quoted(effect.executor.name if effect.executor else '?')}",
            f"Work item: {quoted(effect.work_item.key)} (epoch {effect.epoch})",
            f"Kind:      {quoted(effect.kind)}",
            f"Target:    {quoted(effect.target)}",
            f"Digest:    {effect.content_digest}",
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
            status=ApprovalNotice.Status.DEAD, last_error=f"{type(exc).__name__}: {exc}"[:500]
        )
        return
    effect_approver_reached(effect_id=effect.id)
