"""What one sweep did (leaseboard.sweeps.services.sweep_run fills it batch by batch): the
transitions, the alerts it opened and their latencies, its steps, its duration; and its
one-line JSON summary for the task's log."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

JEOPARDY, EXPIRE, RECOVER, REDUE = "jeopardy", "expire", "recover", "redue"


@dataclass
class SweepReport:
    jeopardy: int = 0
    expired: int = 0
    recovered: int = 0  # overdue after an outage: moved to jeopardy with a grace
    skipped: int = 0  # changed between claim and write; left alone
    batches: int = 0
    more: bool = False  # stopped at max_batches with work left; the next tick continues
    recovery_alert_id: int | None = None
    alert_ids: list[int] = field(default_factory=list)
    steps: dict[str, int] = field(default_factory=dict)
    duration_s: float = 0.0
    alerts_by_kind: Counter = field(default_factory=Counter)
    latencies_s: list[float] = field(default_factory=list)

    def opened(self, alerts: list[tuple[int, str, int | None]], now: int) -> None:
        """Count alerts this sweep opened: (id, kind, due time) each."""
        for alert_id, kind, due in alerts:
            self.alert_ids.append(alert_id)
            self.alerts_by_kind[kind] += 1
            self.latencies_s.append(max(0, now - (due or now)) / 1000)


def sweep_report_json(report: SweepReport) -> str:
    return json.dumps(
        {
            "jeopardy": report.jeopardy,
            "expired": report.expired,
            "recovered": report.recovered,
            "skipped": report.skipped,
            "batches": report.batches,
            "more": report.more,
            "alerts": len(report.alert_ids),
            "steps": report.steps,
            "duration_ms": round(report.duration_s * 1000, 1),
        }
    )
