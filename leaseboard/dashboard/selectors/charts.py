"""Geometry for the inline SVG charts (the template draws them; no JavaScript, no chart
library). Pure: numbers in, coordinates out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GapPoint:
    at_ms: int
    gap_ms: int


def gap_chart(
    gaps: list[GapPoint], threshold_ms: int, ttl_ms: int, width: int = 320, height: int = 80
) -> dict[str, Any]:
    """Bar geometry for an inline SVG: one bar per gap, a line at the jeopardy threshold."""
    top = max([threshold_ms, ttl_ms, *[g.gap_ms for g in gaps]] or [1]) or 1
    n = max(len(gaps), 1)
    slot = width / n
    bars = []
    for i, g in enumerate(gaps):
        h = round(g.gap_ms / top * (height - 4), 1)
        bars.append(
            {
                "x": round(i * slot + 1, 1),
                "y": round(height - h, 1),
                "w": round(max(slot - 2, 1), 1),
                "h": h,
                "over": g.gap_ms >= threshold_ms,
                "gap_ms": g.gap_ms,
            }
        )
    return {
        "width": width,
        "height": height,
        "bars": bars,
        "threshold_y": round(height - threshold_ms / top * (height - 4), 1),
        "threshold_ms": threshold_ms,
    }
