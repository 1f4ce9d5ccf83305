"""How long expiry sweeps have been stopped, from the last completed sweep's time and the
database clock (docs/design.md §14): what /healthz, /metrics and the dashboard's banner say. Pure:
the caller passes the times and the threshold."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SweepAge:
    last_completed_at_ms: int | None
    age_s: float | None  # None: no sweep ever completed
    stale: bool

    @property
    def words(self) -> str:
        """'2 min ago'-style age for people; '' when none ever completed."""
        if self.age_s is None:
            return ""
        seconds = int(self.age_s)
        if seconds < 90:
            return f"{seconds} s ago"
        if seconds < 90 * 60:
            return f"{round(seconds / 60)} min ago"
        return f"{round(seconds / 3600)} h ago"


def sweep_age_from(last_completed_at_ms: int | None, now_ms: int, stale_after_s: float) -> SweepAge:
    """Stale once the last completed sweep is older than `stale_after_s`, or when none
    ever completed (leases are then not being ended or alerted)."""
    if last_completed_at_ms is None:
        return SweepAge(None, None, stale=True)
    age_s = max(0.0, (now_ms - last_completed_at_ms) / 1000)
    return SweepAge(last_completed_at_ms, age_s, stale=age_s > stale_after_s)
