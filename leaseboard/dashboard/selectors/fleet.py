"""Fleet health over time, for the charts page: per time bucket, leases granted, entering
jeopardy, expiring, and ending otherwise (lease events on lease_event_at_idx), the live
leases at the end of each bucket (counted back from the exact live count now), and the
distribution of live leases' largest renewal gap against their jeopardy threshold.
3 queries; nothing here writes."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Case, Count, F, IntegerField, Value, When

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Lease, LeaseEvent
from leaseboard.core.models.leases import LIVE_STATES

MINUTE = 60_000
# Range -> (span, bucket), each about sixty buckets.
RANGES = {
    "1h": (60 * MINUTE, MINUTE),
    "6h": (360 * MINUTE, 5 * MINUTE),
    "24h": (1440 * MINUTE, 20 * MINUTE),
    "7d": (7 * 1440 * MINUTE, 3 * 60 * MINUTE),
}
RANGE_LABELS = [("1h", "last hour"), ("6h", "6 hours"), ("24h", "24 hours"), ("7d", "7 days")]
# Largest gap as a share of the lease's jeopardy threshold.
GAP_BUCKETS = (
    ("not renewed yet", None),
    ("< 25%", 0.25),
    ("25–50%", 0.5),
    ("50–75%", 0.75),
    ("75–99%", 1.0),
    ("≥ 100%", None),
)
ENDINGS = (LeaseEvent.Kind.RELEASED, LeaseEvent.Kind.REVOKED)


@dataclass
class FleetHealth:
    range: str
    now_ms: int
    span_ms: int
    bucket_ms: int
    starts: list[int]  # each bucket's start, ms
    granted: list[int]
    jeopardy: list[int]
    expired: list[int]
    ended: list[int]  # released or revoked
    live: list[int]  # live leases at the end of each bucket
    live_now: int
    gaps: list[tuple[str, int]]


def fleet_health(range_key: str) -> FleetHealth:
    range_key = range_key if range_key in RANGES else "1h"
    span, step = RANGES[range_key]
    now = db_now_ms()
    start = now - span
    n = span // step
    counts = {
        kind: [0] * n
        for kind in (
            LeaseEvent.Kind.GRANTED,
            LeaseEvent.Kind.JEOPARDY,
            LeaseEvent.Kind.EXPIRED,
            "ended",
        )
    }
    rows = (
        LeaseEvent.objects.filter(at_ms__gte=start, at_ms__lt=now)
        .filter(
            kind__in=[
                LeaseEvent.Kind.GRANTED,
                LeaseEvent.Kind.JEOPARDY,
                LeaseEvent.Kind.EXPIRED,
                *ENDINGS,
            ]
        )
        .annotate(bucket=(F("at_ms") - start) / step)
        .values("bucket", "kind")
        .annotate(n=Count("id"))
        .order_by()
    )
    for row in rows:
        b = min(int(row["bucket"]), n - 1)
        kind = "ended" if row["kind"] in ENDINGS else row["kind"]
        counts[kind][b] += row["n"]
    gap_rows, live_now = _gaps_and_live()
    # Live at the end of bucket i = live now, minus what started after it, plus what ended.
    live = [0] * n
    running = live_now
    for i in range(n - 1, -1, -1):
        live[i] = max(running, 0)
        running += (
            counts[LeaseEvent.Kind.EXPIRED][i]
            + counts["ended"][i]
            - counts[LeaseEvent.Kind.GRANTED][i]
        )
    return FleetHealth(
        range=range_key,
        now_ms=now,
        span_ms=span,
        bucket_ms=step,
        starts=[start + i * step for i in range(n)],
        granted=counts[LeaseEvent.Kind.GRANTED],
        jeopardy=counts[LeaseEvent.Kind.JEOPARDY],
        expired=counts[LeaseEvent.Kind.EXPIRED],
        ended=counts["ended"],
        live=live,
        live_now=live_now,
        gaps=gap_rows,
    )


def _gaps_and_live() -> tuple[list[tuple[str, int]], int]:
    """Live leases by largest renewal gap as a share of their jeopardy threshold, in one
    GROUP BY over the live leases (the partial index lease_due_idx)."""
    threshold = F("jeopardy_after_ms")
    bucket = Case(
        When(renew_count=0, then=Value(0)),
        When(max_gap_ms__lt=threshold * 0.25, then=Value(1)),
        When(max_gap_ms__lt=threshold * 0.5, then=Value(2)),
        When(max_gap_ms__lt=threshold * 0.75, then=Value(3)),
        When(max_gap_ms__lt=threshold, then=Value(4)),
        default=Value(5),
        output_field=IntegerField(),
    )
    by_bucket = dict(
        Lease.objects.filter(state__in=LIVE_STATES)
        .annotate(b=bucket)
        .values("b")
        .annotate(n=Count("id"))
        .order_by()
        .values_list("b", "n")
    )
    rows = [(label, int(by_bucket.get(i, 0))) for i, (label, _) in enumerate(GAP_BUCKETS)]
    return rows, sum(n for _, n in rows)
