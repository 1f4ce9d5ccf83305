"""Prometheus metrics at /metrics, read from the database at scrape time so every web
process reports the same figures (no process memory that another process needs).

Counters written by sweeps live in MetricCounter; lease and refusal figures are queries:
leases by certainty use the live-lease partial index; refusals group the refused effects.
The last completed sweep and the outboxes' backlogs say whether expiry and the work owed
to the broker are moving (docs/design.md §14).
"""

from __future__ import annotations

from collections import defaultdict

from django.db.models import Count, Sum
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)

from leaseboard.core.clock import DbNowMs
from leaseboard.core.models import Effect, Lease
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.sweeps.health import sweep_age
from leaseboard.sweeps.models import MetricCounter
from leaseboard.sweeps.outbox import outbox_backlog

PREFIX = "leaseboard_"


class DatabaseCollector:
    def collect(self):  # type: ignore[no-untyped-def]
        yield from self._leases()
        yield from self._refusals()
        yield from self._counters()
        yield from self._sweeps()
        yield from self._outboxes()

    def _sweeps(self):  # type: ignore[no-untyped-def]
        age = sweep_age()
        yield GaugeMetricFamily(
            PREFIX + "sweep_last_completed_timestamp_seconds",
            "When the last sweep completed (Unix time; 0: none ever did)",
            value=(age.last_completed_at_ms or 0) / 1000,
        )
        yield GaugeMetricFamily(
            PREFIX + "sweep_stale",
            "1 while the last completed sweep is older than LEASEBOARD_SWEEPS_STALE_AFTER_S",
            value=1.0 if age.stale else 0.0,
        )

    def _outboxes(self):  # type: ignore[no-untyped-def]
        backlog = outbox_backlog()
        pending = GaugeMetricFamily(
            PREFIX + "outbox_pending",
            "Rows waiting in each outbox (work owed to the broker)",
            labels=["outbox"],
        )
        oldest = GaugeMetricFamily(
            PREFIX + "outbox_oldest_due_seconds",
            "How long the longest-waiting due row of each outbox has waited",
            labels=["outbox"],
        )
        for name, b in sorted(backlog.items()):
            pending.add_metric([name], b.pending)
            oldest.add_metric([name], b.oldest_due_s)
        yield pending
        yield oldest

    def _leases(self):  # type: ignore[no-untyped-def]
        live = Lease.objects.filter(state__in=LIVE_STATES).annotate(now=DbNowMs())
        by_state = defaultdict(float)
        # Certainty by time (docs/design.md §3): a lease past expires_at is expired, swept or not.
        for state, overdue, n in _certainty_rows(live):
            by_state["expired_unswept" if overdue else state] += n
        certainty = GaugeMetricFamily(
            PREFIX + "leases", "Live leases by certainty", labels=["certainty"]
        )
        for state in (*LIVE_STATES, "expired_unswept"):
            certainty.add_metric([state], by_state.get(state, 0.0))
        yield certainty
        renewals = live.aggregate(n=Sum("renew_count"))["n"] or 0
        yield GaugeMetricFamily(
            PREFIX + "live_lease_renewals", "Renewals recorded on live leases", value=renewals
        )

    def _refusals(self):  # type: ignore[no-untyped-def]
        family = CounterMetricFamily(
            PREFIX + "refusals", "Refused effects by code", labels=["code"]
        )
        rows = (
            Effect.objects.filter(decision=Effect.Decision.REFUSED)
            .values_list("refusal_code")
            .annotate(n=Count("id"))
        )
        for code, n in rows:
            family.add_metric([code], n)
        yield family

    def _counters(self):  # type: ignore[no-untyped-def]
        rows: dict[str, dict[str, float]] = defaultdict(dict)
        for name, label, value in MetricCounter.objects.values_list("name", "label", "value"):
            rows[name][label] = value
        yield _labelled(
            CounterMetricFamily(
                PREFIX + "alerts_opened", "Alerts opened by sweeps, by kind", labels=["kind"]
            ),
            rows.get("alerts_opened_total", {}),
        )
        yield _labelled(
            CounterMetricFamily(
                PREFIX + "sweep_transitions",
                "Lease transitions materialized by sweeps",
                labels=["transition"],
            ),
            rows.get("sweep_transitions_total", {}),
        )
        yield CounterMetricFamily(
            PREFIX + "sweeps", "Sweeps run", value=rows.get("sweeps_total", {}).get("", 0.0)
        )
        yield _labelled(
            CounterMetricFamily(
                PREFIX + "wakeups_failed",
                "Outbox wake-ups a process could not publish to the broker (the sweep "
                "drained those outboxes instead), by task",
                labels=["task"],
            ),
            rows.get("wakeups_failed_total", {}),
        )
        yield _histogram(
            PREFIX + "sweep_duration_seconds",
            "Wall time of one sweep",
            rows.get("sweep_duration_seconds_bucket", {}),
            rows.get("sweep_duration_seconds_sum", {}).get("", 0.0),
        )
        yield _histogram(
            PREFIX + "alert_latency_seconds",
            "From the time an event fell due to the alert being opened",
            rows.get("alert_latency_seconds_bucket", {}),
            rows.get("alert_latency_seconds_sum", {}).get("", 0.0),
        )


def _certainty_rows(live):  # type: ignore[no-untyped-def]
    from django.db.models import BooleanField, Case, Value, When
    from django.db.models import F as _F

    return (
        live.annotate(
            overdue=Case(
                When(expires_at_ms__lte=_F("now"), then=Value(True)),
                default=Value(False),
                output_field=BooleanField(),
            )
        )
        .values_list("state", "overdue")
        .annotate(n=Count("id"))
        .order_by()
    )


def _labelled(family, values: dict[str, float]):  # type: ignore[no-untyped-def]
    for label, value in sorted(values.items()):
        family.add_metric([label], value)
    return family


def _histogram(name: str, doc: str, buckets: dict[str, float], total: float):  # type: ignore[no-untyped-def]
    ordered = sorted(
        ((le, n) for le, n in buckets.items() if le != "+Inf"), key=lambda kv: float(kv[0])
    )
    ordered.append(("+Inf", buckets.get("+Inf", 0.0)))
    return HistogramMetricFamily(name, doc, buckets=ordered, sum_value=total)


REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(DatabaseCollector())


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
