"""The audit log page (managers): entries newest first, filtered by actor, action and date,
keyset-paged on `seq`, each object named (an agent's or a person's name, a work item's key)
instead of its id. 3 queries whatever the page size."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth import get_user_model

from leaseboard.core.models import AuditEntry, Executor
from leaseboard.core.paging import cut_page, int_cursor
from leaseboard.domain.text import filter_text

DAY_MS = 86_400_000
ACTION_HINTS = (
    "lease.",
    "agent.",
    "alert.",
    "takeover.",
    "intervention.",
    "effect.",
    "standing.",
    "user.",
    "auth.",
)


def _day_ms(raw: str) -> int | None:
    try:
        day = datetime.strptime(raw.strip(), "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        return None
    return int(day.timestamp() * 1000)


@dataclass(frozen=True)
class AuditFilters:
    actor: str = ""
    action: str = ""  # a prefix: "lease." or "lease.revoke"
    date_from: str = ""  # YYYY-MM-DD, UTC
    date_to: str = ""
    cursor: str = ""

    @classmethod
    def from_query(cls, params: Any) -> AuditFilters:
        # deliberate: each filter read one a line, as other pages' filters.
        return cls(
            # A NUL would fail in PostgreSQL; replaced, it matches nothing stored.
            actor=filter_text(params, "actor", 150),
            action=filter_text(params, "action", 60),
            date_from=params.get("date_from", "").strip()[:10],
            date_to=params.get("date_to", "").strip()[:10],
            cursor=params.get("cursor", "").strip()[:30],
        )

    # deliberate: each filter named one a line, as the live page's filters.
    def query(self, **changes: Any) -> dict[str, str]:
        values = {
            "actor": self.actor,
            "action": self.action,
            "date_from": self.date_from,
            "date_to": self.date_to,
            "cursor": self.cursor,
        }
        values.update({k: str(v) for k, v in changes.items()})
        return {k: v for k, v in values.items() if v}


@dataclass
class AuditRow:
    entry: AuditEntry
    object_label: str
    object_link: tuple[str, Any] | None  # (url name, argument)


@dataclass
class AuditPage:
    filters: AuditFilters
    rows: list[AuditRow]
    next_cursor: str

    @property
    def entries(self) -> list[AuditEntry]:
        return [r.entry for r in self.rows]


def audit_log(filters: AuditFilters | None = None, *, size: int = 50) -> AuditPage:
    """The audit log newest first, keyset on the unique `seq`."""
    filters = filters or AuditFilters()
    qs = AuditEntry.objects.select_related("work_item").defer("work_item__scope").order_by("-seq")
    if filters.actor:
        qs = qs.filter(actor_name=filters.actor)
    if filters.action:
        qs = qs.filter(action__startswith=filters.action)
    start, end = _day_ms(filters.date_from), _day_ms(filters.date_to)
    if start is not None:
        qs = qs.filter(at_ms__gte=start)
    if end is not None:
        qs = qs.filter(at_ms__lt=end + DAY_MS)
    before = int_cursor(filters.cursor)
    if before is not None:
        qs = qs.filter(seq__lt=before)
    entries, next_cursor = cut_page(list(qs[: size + 1]), size, lambda e: str(e.seq))
    return AuditPage(filters, name_objects(entries), next_cursor)


def name_objects(entries: list[AuditEntry]) -> list[AuditRow]:
    """Each entry with its object named; 2 queries (executors, users) for the whole page."""
    executor_ids, user_ids = set(), set()
    for e in entries:
        if e.object_type == "executor" and e.object_id.isdigit():
            executor_ids.add(int(e.object_id))
        elif e.object_type == "alert_group":
            agent = e.object_id.partition(":")[0]
            if agent.isdigit() and int(agent):
                executor_ids.add(int(agent))
        elif e.object_type == "user" and e.object_id.isdigit():
            user_ids.add(int(e.object_id))
    executors = dict(Executor.objects.filter(id__in=executor_ids).values_list("id", "name"))
    users = dict(get_user_model().objects.filter(id__in=user_ids).values_list("id", "username"))
    return [_row(e, executors, users) for e in entries]


def _row(e: AuditEntry, executors: dict[int, str], users: dict[int, str]) -> AuditRow:
    key = e.work_item.key if e.work_item else ""
    kind, oid = e.object_type, e.object_id
    if kind == "executor" and oid.isdigit():
        name = executors.get(int(oid), f"executor {oid}")
        return AuditRow(e, name, ("dashboard:executor", int(oid)))
    if kind == "user" and oid.isdigit():
        return AuditRow(e, f"person {users.get(int(oid), oid)}", None)
    if kind == "alert_group":
        agent, _, alert_kind = oid.partition(":")
        who = (
            executors.get(int(agent), "no agent") if agent.isdigit() and int(agent) else "no agent"
        )
        return AuditRow(e, f"{who}'s {alert_kind.replace('_', ' ')} alerts", None)
    if kind == "lease":
        epoch = e.before.get("epoch") or e.after.get("epoch")
        return AuditRow(e, f"lease on {key}" + (f" @{epoch}" if epoch else ""), None)
    if kind == "intervention" and oid.isdigit():
        return AuditRow(e, f"intervention #{oid}", ("takeovers:intervention", int(oid)))
    if kind == "takeover_request":
        return AuditRow(e, f"takeover request #{oid}" + (f" of {key}" if key else ""), None)
    if kind in ("effect", "alert"):
        return AuditRow(e, f"{kind}" + (f" on {key}" if key else f" {oid}"), None)
    return AuditRow(e, f"{kind.replace('_', ' ')} {oid}", None)
