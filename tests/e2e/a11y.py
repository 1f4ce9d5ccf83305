"""axe-core in the browser tests: run it on the page as it is and return the violations of
impact serious or critical (WCAG 2.0/2.1 A and AA rules, and axe's best practices).

axe is put into the page through the DevTools protocol (page.evaluate), which the page's
Content Security Policy does not apply to; the page itself never loads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

VENDOR = Path(__file__).resolve().parent / "vendor"
AXE = VENDOR / "axe.min.js"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"
FAILING = ("serious", "critical")
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]

_source: str | None = None


def axe_source() -> str:
    global _source
    if _source is None:
        _source = AXE.read_text()
    return _source


def axe_violations(page: Any, impacts: tuple[str, ...] = FAILING) -> list[dict[str, Any]]:
    """Violations of the given impacts, each with its rule, help and the offending nodes."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(axe_source())
    result = page.evaluate(
        """async (tags) => {
            const r = await axe.run(document, {runOnly: {type: 'tag', values: tags},
                                               resultTypes: ['violations']});
            const node = n => n.target.join(' ') + ' :: ' + n.failureSummary;
            return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                           nodes: v.nodes.slice(0, 5).map(node)}));
        }""",
        TAGS,
    )
    return [v for v in result if v["impact"] in impacts]


def describe(violations: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"[{v['impact']}] {v['id']}: {v['help']}\n    " + "\n    ".join(v["nodes"])
        for v in violations
    )
