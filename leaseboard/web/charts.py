"""Geometry for server-rendered SVG charts (templates/charts/ draws them): numbers in,
coordinates out; no JavaScript and no chart library. Pure, so any page's view can call it
with what its selector read.

Every chart also keeps its data as rows, which the template shows as a table for anyone
who cannot see the picture.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 36, 8, 8, 22


# What a series says about the fleet, and so its colour: normal outcomes are neutral,
# only warnings are amber and only faults red (a normal release is never drawn as alarm).
TONES = {"normal": "normal", "warn": "warning", "fault": "fault"}


@dataclass(frozen=True)
class Series:
    name: str
    values: list[float]
    tone: str = ""  # one of TONES, or "" for a series of one kind among equals (s0..s5)

    def __post_init__(self) -> None:
        if self.tone and self.tone not in TONES:
            raise ValueError(f"tone {self.tone!r}: one of {', '.join(TONES)}")

    def css(self, index: int) -> str:
        return f"tone-{self.tone}" if self.tone else f"s{index % 6}"


@dataclass
class Chart:
    title: str
    summary: str  # one sentence for screen readers: what the picture says
    width: int
    height: int
    labels: list[str]
    series: list[Series]
    shapes: list[dict[str, Any]] = field(default_factory=list)
    y_ticks: list[dict[str, Any]] = field(default_factory=list)
    x_ticks: list[dict[str, Any]] = field(default_factory=list)
    line: str = ""  # an SVG path for a line chart
    unit: str = ""

    @property
    def rows(self) -> list[tuple[str, list[float]]]:
        return [(label, [s.values[i] for s in self.series]) for i, label in enumerate(self.labels)]

    @property
    def legend(self) -> list[tuple[str, str]]:
        """(css class, words) per series; a toned series says its tone in words too."""
        return [
            (s.css(i), f"{s.name} ({TONES[s.tone]})" if s.tone else s.name)
            for i, s in enumerate(self.series)
        ]


def _scale(value: float) -> tuple[float, float]:
    """(top, step): a round whole step (1, 2 or 5 times a power of ten) that cuts the axis
    into about four parts, and the first multiple of it at or above `value`."""
    value = max(value, 1)
    raw = value / 4
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    step = max(step, 1)  # every chart here counts things
    return step * math.ceil(value / step), step


def _ticks(top: float, step: float, plot_h: float) -> list[dict[str, Any]]:
    out = []
    for i in range(round(top / step) + 1):
        v = step * i
        out.append({"y": round(PAD_TOP + plot_h - plot_h * v / top, 1), "label": f"{v:g}"})
    return out


def _x_ticks(labels: list[str], slot: float, every: int) -> list[dict[str, Any]]:
    shown = [i for i in range(len(labels)) if i % every == 0]
    last = len(labels) - 1
    if last not in shown and (not shown or last - shown[-1] > every / 2):
        shown.append(last)
    return [{"x": round(PAD_LEFT + i * slot + slot / 2, 1), "label": labels[i]} for i in shown]


def _chart(
    title: str,
    summary: str,
    labels: list[str],
    series: list[Series],
    *,
    size: tuple[int, int],
    scale: tuple[float, float],
    max_x_labels: int,
    **drawn: Any,
) -> Chart:
    """The chart with its axes: y ticks on the scale (top, step), at most about
    `max_x_labels` labels under the slots; `drawn` is what the plot holds."""
    width, height = size
    slot = (width - PAD_LEFT - PAD_RIGHT) / max(len(labels), 1)
    every = max(1, -(-max(len(labels), 1) // max_x_labels))
    return Chart(
        title=title,
        summary=summary,
        width=width,
        height=height,
        labels=labels,
        series=series,
        y_ticks=_ticks(scale[0], scale[1], height - PAD_TOP - PAD_BOTTOM),
        x_ticks=_x_ticks(labels, slot, every),
        **drawn,
    )


def bars(
    title: str,
    summary: str,
    labels: list[str],
    series: list[Series],
    *,
    stacked: bool = True,
    width: int = 640,
    height: int = 200,
    max_x_labels: int = 8,
    unit: str = "",
) -> Chart:
    """Vertical bars per label; several series stacked (or side by side)."""
    n = max(len(labels), 1)
    plot_w, plot_h = width - PAD_LEFT - PAD_RIGHT, height - PAD_TOP - PAD_BOTTOM
    totals = [
        (sum if stacked else max)([s.values[i] for s in series] or [0]) for i in range(len(labels))
    ]
    top, step = _scale(max(totals or [0]))
    slot = plot_w / n
    shapes = []
    for i, label in enumerate(labels):
        base: float = PAD_TOP + plot_h
        inner = max(slot - 2, 1) / (1 if stacked else max(len(series), 1))
        for k, s in enumerate(series):
            v = s.values[i]
            h = plot_h * v / top
            x = PAD_LEFT + i * slot + 1 + (0 if stacked else k * inner)
            y = base - h
            if v:
                shapes.append(
                    {
                        "x": round(x, 1),
                        "y": round(y, 1),
                        "w": round(inner, 1),
                        "h": round(h, 1),
                        "css": s.css(k),
                        "title": f"{label}: {s.name} {v:g}{unit}",
                    }
                )
            if stacked:
                base = y
    return _chart(
        title,
        summary,
        labels,
        series,
        size=(width, height),
        scale=(top, step),
        max_x_labels=max_x_labels,
        shapes=shapes,
        unit=unit,
    )


def counts_bars(
    title: str, lead: str, counts: list[tuple[str, int]], *, name: str, max_x_labels: int = 8
) -> Chart:
    """One bar per (label, count), one series named `name`; the summary is `lead` and then
    every label's count ("lead: a: 3; b: 1.")."""
    return bars(
        title,
        f"{lead}: " + "; ".join(f"{label}: {n}" for label, n in counts) + ".",
        [label for label, _ in counts],
        [Series(name, [float(n) for _, n in counts])],
        max_x_labels=max_x_labels,
    )


def line(
    title: str,
    summary: str,
    labels: list[str],
    values: list[float],
    *,
    name: str,
    width: int = 640,
    height: int = 200,
    max_x_labels: int = 8,
) -> Chart:
    """One series as a line over the labels."""
    n = max(len(labels), 1)
    plot_w, plot_h = width - PAD_LEFT - PAD_RIGHT, height - PAD_TOP - PAD_BOTTOM
    top, step = _scale(max(values or [0]))
    slot = plot_w / n
    points = [
        (PAD_LEFT + i * slot + slot / 2, PAD_TOP + plot_h - plot_h * v / top)
        for i, v in enumerate(values)
    ]
    path = " ".join(f"{'M' if i == 0 else 'L'}{x:.1f},{y:.1f}" for i, (x, y) in enumerate(points))
    return _chart(
        title,
        summary,
        labels,
        [Series(name, values)],
        size=(width, height),
        scale=(top, step),
        max_x_labels=max_x_labels,
        line=path,
    )


def ago_label(ms: int) -> str:
    """A bucket's start as time before now ("-45 min", "-6 h", "-3 d"): zone-free labels."""
    minutes = round(ms / 60_000)
    if minutes == 0:
        return "now"
    if minutes < 120:
        return f"-{minutes} min"
    hours = round(minutes / 60)
    if hours < 48:
        return f"-{hours} h"
    return f"-{round(hours / 24)} d"


def per_label(ms: int) -> str:
    """A bucket's length in words: "minute", "5 minutes", "3 hours", "day"."""
    minutes = max(1, ms // 60_000)
    if minutes < 60:
        return "minute" if minutes == 1 else f"{minutes} minutes"
    hours = minutes // 60
    if hours < 24:
        return "hour" if hours == 1 else f"{hours} hours"
    days = hours // 24
    return "day" if days == 1 else f"{days} days"
