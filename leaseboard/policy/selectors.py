"""Reads for the settings pages: a fixed number of queries per page."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, Q

from leaseboard.core.authority import BREAK_GLASS_PERMISSION
from leaseboard.core.models import AuditEntry, EffectRule, Executor, Queue, Recipient, RoleScope
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.domain.authority import ROLE_NAMES
from leaseboard.policy.models import PolicyChange
from leaseboard.policy.services.queues import notify_shown, queue_snapshot

CONFIG_ACTIONS = (
    "queue.",
    "policy.",
    "user.",
    "agent.",
    "recipient.",
    "config.",
    "change.",
    "four_eyes.",
)
HISTORY_PAGE = 50


def queues_overview() -> list[Queue]:
    return list(
        Queue.objects.order_by("name").annotate(
            n_rules=Count("rules", distinct=True),
            n_admitted=Count(
                "work_items",
                filter=Q(work_items__admission="admitted", work_items__status="open"),
                distinct=True,
            ),
            n_waiting=Count("work_items", filter=Q(work_items__admission="waiting"), distinct=True),
            n_pending=Count(
                "policy_changes", filter=Q(policy_changes__status="pending"), distinct=True
            ),
        )
    )


@dataclass
class QueuePage:
    queue: Queue
    settings: dict[str, Any]
    rules: list[EffectRule]
    pending: PolicyChange | None
    notify: dict[str, Any]


def queue_page(name: str) -> QueuePage | None:
    queue = Queue.objects.filter(name=name).first()
    if queue is None:
        return None
    return QueuePage(
        queue=queue,
        settings=queue_snapshot(queue),
        rules=list(EffectRule.objects.filter(queue=queue).order_by("position")),
        pending=PolicyChange.objects.filter(
            kind=PolicyChange.Kind.RULES, queue=queue, status="pending"
        ).first(),
        notify=notify_shown(queue.notify or {}),
    )


@dataclass
class GlobalPage:
    """The rules for every queue: tried before each queue's own, which only tighten them."""

    rules: list[EffectRule]
    default: str
    version: int
    pending: PolicyChange | None


def global_page() -> GlobalPage:
    from leaseboard.core.services.rule_sets import global_head

    version, default = global_head()
    return GlobalPage(
        rules=list(EffectRule.objects.filter(queue__isnull=True).order_by("position")),
        default=default,
        version=version,
        pending=PolicyChange.objects.filter(
            kind=PolicyChange.Kind.RULES, queue__isnull=True, status="pending"
        ).first(),
    )


@dataclass
class Person:
    id: int
    username: str
    roles: list[str]
    break_glass: bool
    active: bool
    superuser: bool
    scopes: str = ""  # "operator:payments approver:refunds": roles held for named queues


def people_list() -> list[Person]:
    app, codename = BREAK_GLASS_PERMISSION.split(".")
    users = (
        get_user_model()
        .objects.order_by("username")
        .prefetch_related("groups", "user_permissions__content_type")
    )
    scoped: dict[int, list[str]] = {}
    for s in RoleScope.objects.order_by("role"):
        scoped.setdefault(s.user_id, []).extend(f"{s.role}:{q}" for q in sorted(s.queues))
    out = []
    for user in users:
        out.append(
            Person(
                id=user.pk,
                username=user.get_username(),
                roles=sorted(g.name for g in user.groups.all() if g.name in ROLE_NAMES),
                break_glass=any(
                    p.codename == codename and p.content_type.app_label == app
                    for p in user.user_permissions.all()
                ),
                active=user.is_active,
                superuser=user.is_superuser,
                scopes=" ".join(scoped.get(user.pk, [])),
            )
        )
    return out


def queue_names() -> list[str]:
    return list(Queue.objects.order_by("name").values_list("name", flat=True))


def credentials_list() -> list[Executor]:
    return list(
        Executor.objects.filter(kind=Executor.Kind.AGENT)
        .order_by("name")
        .annotate(n_live=Count("leases", filter=Q(leases__state__in=LIVE_STATES)))
    )


def recipients_list() -> list[Recipient]:
    """Recipients by name. Neither secret leaves the database: only whether there is a
    token and a webhook (the webhook's URL is shown, it is not a secret)."""
    return list(
        Recipient.objects.order_by("name").only(
            "id", "name", "is_active", "token_hash", "webhook_url", "created_at"
        )
    )


def recipient_name(pk: int) -> str | None:
    return Recipient.objects.filter(pk=pk).values_list("name", flat=True).first()


def changes_list() -> list[PolicyChange]:
    related = ("queue", "subject")
    pending = list(
        PolicyChange.objects.filter(status="pending").select_related(*related).order_by("id")
    )
    recent = list(
        PolicyChange.objects.exclude(status="pending").select_related(*related).order_by("-id")[:20]
    )
    return pending + recent


@dataclass
class HistoryPage:
    entries: list[AuditEntry]
    next_cursor: str


def config_history(cursor: str = "") -> HistoryPage:
    """Configuration changes, newest first, keyset-paged on the audit sequence."""
    q = Q()
    for prefix in CONFIG_ACTIONS:
        q |= Q(action__startswith=prefix)
    qs = AuditEntry.objects.filter(q).order_by("-seq")
    if cursor.isdigit():
        qs = qs.filter(seq__lt=int(cursor))
    entries = list(qs[: HISTORY_PAGE + 1])
    more = len(entries) > HISTORY_PAGE
    entries = entries[:HISTORY_PAGE]
    return HistoryPage(entries, str(entries[-1].seq) if more and entries else "")
