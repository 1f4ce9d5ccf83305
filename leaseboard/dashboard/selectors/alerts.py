"""The alerts page: alerts grouped by (agent, kind) with counts and first/last seen, or one
group's alerts in a keyset list; filters by kind, agent, queue and state; how many are new
since the page was opened; and one alert's row after an acknowledgement. The header's
badge count lives in `leaseboard.web.pages`.

Grouped: one GROUP BY over the filtered alerts (open alerts range over the partial index
`alert_open_idx`), the snoozes in force beside it; 4 queries whatever the number of alerts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Max, Min, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Alert, AlertSnooze
from leaseboard.core.paging import cut_page, page_version, pair_cursor
from leaseboard.core.selectors import alert_group_key, alerts_unsnoozed
from leaseboard.domain.text import storable_or_replaced

GROUP_LIMIT = 200
NEW_CAP = 999
NO_AGENT = "(none)"
STATES = (
    ("attention", "needs attention"),  # open, not acknowledged, not snoozed
    ("open", "open"),
    ("acknowledged", "acknowledged, open"),
    ("snoozed", "snoozed"),
    ("resolved", "resolved"),
    ("all", "all"),
)
STATE_VALUES = tuple(value for value, _ in STATES)


@dataclass(frozen=True)
class AlertFilters:
    kind: str = ""
    agent: str = ""  # an agent's name, NO_AGENT, or "" for any
    queue: str = ""
    state: str = "attention"
    view: str = "groups"  # or "list"
    since: int = 0  # the newest alert id when the page was opened
    cursor: str = ""
    incident: int = 0  # a burst incident: list its members (the drill-down)

    @classmethod
    def from_query(cls, params: Any) -> AlertFilters:
        kind = params.get("kind", "")
        state = params.get("state", "attention")
        since, incident = _count(params.get("since", 0)), _count(params.get("incident", 0))
        return cls(
            kind=kind if kind in Alert.Kind.values else "",
            # A NUL would fail in PostgreSQL; replaced, it matches nothing stored.
            agent=storable_or_replaced(params.get("agent", "").strip()[:150]),
            queue=storable_or_replaced(params.get("queue", "").strip()[:100]),
            state=state if state in STATE_VALUES else "attention",
            view="list" if params.get("view") == "list" or incident else "groups",
            since=since,
            cursor=params.get("cursor", "").strip()[:60],
            incident=incident,
        )

    def query(self, **changes: Any) -> dict[str, str]:
        values = {
            "kind": self.kind,
            "agent": self.agent,
            "queue": self.queue,
            "state": "" if self.state == "attention" else self.state,
            "view": "" if self.view == "groups" else self.view,
            "since": str(self.since) if self.since else "",
            "cursor": self.cursor,
            "incident": str(self.incident) if self.incident else "",
        }
        values.update({k: str(v) for k, v in changes.items()})
        return {k: v for k, v in values.items() if v}


def _count(raw: Any) -> int:
    try:
        return max(0, min(int(raw), 2**62))
    except (TypeError, ValueError):
        return 0


def filtered(filters: AlertFilters) -> QuerySet[Alert]:
    if filters.incident:  # a burst's members: resolved when they joined it, listed all
        return Alert.objects.filter(folded_into_id=filters.incident)
    # A recurrence folded into an incident is counted by it (occurrences), not listed.
    qs = Alert.objects.filter(folded_into__isnull=True)
    state = filters.state
    if state in ("attention", "open", "acknowledged", "snoozed"):
        qs = qs.filter(resolved_at_ms__isnull=True)
    if state == "attention":
        qs = alerts_unsnoozed(qs.filter(acknowledged_at_ms__isnull=True))
    elif state == "acknowledged":
        qs = qs.filter(acknowledged_at_ms__isnull=False)
    elif state == "snoozed":
        qs = alerts_unsnoozed(qs, snoozed=True)
    elif state == "resolved":
        qs = qs.filter(resolved_at_ms__isnull=False)
    if filters.kind:
        qs = qs.filter(kind=filters.kind)
    if filters.agent == NO_AGENT:
        qs = qs.filter(lease__isnull=True)
    elif filters.agent:
        qs = qs.filter(lease__holder__name=filters.agent)
    if filters.queue:
        qs = qs.filter(work_item__queue__name=filters.queue)
    return qs


@dataclass
class AlertGroup:
    agent_id: int | None
    agent: str
    kind: str
    count: int
    occurrences: int  # incidents reported more than once count each time (recipient reports)
    unacknowledged: int
    new: int
    first_ms: int
    last_ms: int
    last_id: int
    last_message: str
    snoozed_until_ms: int | None
    queue: str = ""  # a burst incident's queue (many agents' alerts at once)

    @property
    def key(self) -> str:
        return alert_group_key(self.agent_id, self.kind)

    @property
    def agent_filter(self) -> str:
        return self.agent if self.agent_id else NO_AGENT


@dataclass
class AlertGroupsPage:
    filters: AlertFilters
    groups: list[AlertGroup]
    now_ms: int
    max_id: int  # the newest alert id among those shown: a bulk action stops there
    new: int  # alerts shown that arrived after `filters.since`
    more: bool  # more groups than GROUP_LIMIT
    version: str = field(default="")


def alert_groups(filters: AlertFilters) -> AlertGroupsPage:
    """Alerts grouped by (agent, kind), most recently seen first; 4 queries (the clock, the
    groups, their latest messages, the snoozes in force)."""
    now_ms = db_now_ms()
    rows = list(
        filtered(filters)
        .values("lease__holder_id", "lease__holder__name", "kind", "queue__name")
        .annotate(
            n=Count("id"),
            occurrences=Sum("occurrences"),
            unacked=Count("id", filter=Q(acknowledged_at_ms__isnull=True)),
            new=Count("id", filter=Q(id__gt=filters.since)) if filters.since else Value(0),
            first=Min("opened_at_ms"),
            last=Max(Coalesce("last_seen_at_ms", "opened_at_ms")),
            last_id=Max("id"),
        )
        .order_by("-last", "kind")[: GROUP_LIMIT + 1]
    )
    more = len(rows) > GROUP_LIMIT
    rows = rows[:GROUP_LIMIT]
    messages = dict(
        Alert.objects.filter(id__in=[r["last_id"] for r in rows]).values_list("id", "message")
    )
    snoozed: dict[tuple[int, str], int] = {}
    for agent_id, kind, until in AlertSnooze.objects.filter(until_ms__gt=now_ms).values_list(
        "executor_id", "kind", "until_ms"
    ):
        snoozed[(agent_id or 0, kind)] = max(until, snoozed.get((agent_id or 0, kind), 0))
    groups = [
        AlertGroup(
            agent_id=r["lease__holder_id"],
            agent=r["lease__holder__name"] or "no agent",
            kind=r["kind"],
            count=r["n"],
            occurrences=int(r["occurrences"] or r["n"]),
            unacknowledged=r["unacked"],
            new=min(int(r["new"]), NEW_CAP),
            first_ms=r["first"],
            last_ms=r["last"],
            last_id=r["last_id"],
            last_message=messages.get(r["last_id"], ""),
            snoozed_until_ms=snoozed.get((r["lease__holder_id"] or 0, r["kind"])),
            queue=r["queue__name"] or "",
        )
        for r in rows
    ]
    page = AlertGroupsPage(
        filters=filters,
        groups=groups,
        now_ms=now_ms,
        max_id=max([filters.since, *(g.last_id for g in groups)]),
        new=min(sum(g.new for g in groups), NEW_CAP),
        more=more,
    )
    page.version = _version(page)
    return page


def _version(page: AlertGroupsPage) -> str:
    body = {
        "f": page.filters.query(),
        "g": [
            [g.key, g.count, g.occurrences, g.unacknowledged, g.new, g.last_id, g.snoozed_until_ms]
            for g in page.groups
        ],
        "m": page.more,
    }
    return page_version(body)


@dataclass
class AlertPage:
    alerts: list[Alert]
    next_cursor: str
    filters: AlertFilters
    now_ms: int


def _with_people() -> QuerySet[Alert]:
    return Alert.objects.select_related("work_item", "lease__holder", "acknowledged_by").defer(
        "lease__recent_renewals", "work_item__scope"
    )


def alerts_list(filters: AlertFilters, size: int = 50) -> AlertPage:
    """Alerts newest first, keyset paged on (opened_at_ms, id); 2 queries."""
    now_ms = db_now_ms()
    ids = filtered(filters).values("id")
    qs = _with_people().filter(id__in=ids).order_by("-opened_at_ms", "-id")
    parsed = pair_cursor(filters.cursor, int)
    if parsed:
        at, aid = parsed
        qs = qs.filter(Q(opened_at_ms__lt=at) | Q(opened_at_ms=at, id__lt=aid))
    alerts, next_cursor = cut_page(list(qs[: size + 1]), size, lambda a: f"{a.opened_at_ms}_{a.id}")
    return AlertPage(alerts, next_cursor, filters, now_ms)


def alert_for_row(alert_id: int) -> Alert | None:
    return _with_people().filter(id=alert_id).first()
