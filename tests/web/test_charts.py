"""leaseboard.web.charts: server-rendered SVG charts whose colours say what is normal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from leaseboard.web import charts


def _fleet_like() -> charts.Chart:
    return charts.bars(
        "Ends",
        "Ends per minute.",
        ["-2 min", "-1 min"],
        [
            charts.Series("released or revoked", [5.0, 7.0], "normal"),
            charts.Series("entered jeopardy", [1.0, 0.0], "warn"),
            charts.Series("expired", [0.0, 2.0], "fault"),
        ],
    )


def test_a_toned_series_is_drawn_and_listed_in_its_tone_not_a_palette_slot():
    chart = _fleet_like()
    assert {s["css"] for s in chart.shapes} == {"tone-normal", "tone-warn", "tone-fault"}
    assert chart.legend == [
        ("tone-normal", "released or revoked (normal)"),
        ("tone-warn", "entered jeopardy (warning)"),
        ("tone-fault", "expired (fault)"),
    ]


def test_counted_bars_say_every_label_and_its_count_in_the_summary():
    chart = charts.counts_bars("Gaps", "Leases by gap", [("<25%", 3), ("25-50%", 1)], name="leases")
    assert chart.summary == "Leases by gap: <25%: 3; 25-50%: 1."
    assert chart.rows == [("<25%", [3.0]), ("25-50%", [1.0])]
    assert chart.legend == [("s0", "leases")]


def test_series_without_a_tone_keep_the_categorical_palette():
    chart = charts.bars("R", "r.", ["a"], [charts.Series("x", [1.0]), charts.Series("y", [2.0])])
    assert [css for css, _ in chart.legend] == ["s0", "s1"]


def test_an_unknown_tone_is_refused():
    with pytest.raises(ValueError, match="one of normal, warn, fault"):
        charts.Series("x", [1.0], "alarm")


def _contrast(a: str, b: str) -> float:
    def lum(hex_colour: str) -> float:
        rgb = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize("scheme", [0, 1], ids=["light", "dark"])
def test_every_tone_stands_out_from_the_chart_panel_by_3_to_1(scheme):
    """WCAG 1.4.11 (non-text contrast) for the tone colours in both colour schemes."""
    text = (Path(charts.__file__).parents[2] / "static" / "leaseboard.css").read_text()
    block = re.findall(r"--panel:#[0-9a-f]{6}.*?--chart-fault:#[0-9a-f]{6};", text, re.S)[scheme]
    panel = block.split(";")[0].removeprefix("--panel:")
    for tone in ("normal", "warn", "fault"):
        colour = re.search(rf"--chart-{tone}:(#[0-9a-f]{{6}})", block)
        assert colour, tone
        assert _contrast(colour.group(1), panel) >= 3, (tone, colour.group(1), panel)


def test_the_fleet_page_stacks_normal_ends_in_the_neutral_tone_with_a_legend(operator_client):
    html = operator_client.get("/fleet/").content.decode()
    legend = re.search(r'<ul class="legend".*?</ul>', html, re.S)
    assert legend is not None
    assert 'class="tone-normal"></i>released or revoked (normal)' in legend.group(0)
    assert 'class="tone-fault"></i>expired (fault)' in legend.group(0)
