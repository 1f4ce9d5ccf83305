"""A module is one subject and fits on a few screens; a function does one step. A module
under leaseboard/ over MODULE_LINES lines or a function over FUNCTION_LINES fails here
unless it is named below with the reason it stays so (or, for a function, its docstring
says why it is one piece: a sentence starting "One piece:"). The lists may only shrink:
an entry that is no longer over its limit fails until it is removed."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CODE = REPO / "leaseboard"
MODULE_LINES = 400
FUNCTION_LINES = 60
REASON = "One piece:"

LONG_MODULES: dict[str, str] = {}

LONG_FUNCTIONS = {
    ("core/services/recipients.py", "recipient_report_record"): (
        "one transaction: the report, its effect row, its alert and its audit entry"
    ),
    ("envconf.py", "database_from_url"): (
        "one paragraph per connection option, each with its reason (fail-fast timeouts, "
        "the HA hosts list of docs/deployment.md §11)"
    ),
    ("core/services/leases/grants.py", "lease_grant_locked"): (
        "a hot path: the grant in one statement with its gates (docs/benchmarks.md)"
    ),
}


def _sizes() -> tuple[dict[str, int], dict[tuple[str, str], tuple[int, str]]]:
    modules, functions = {}, {}
    for path in sorted(CODE.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        rel = path.relative_to(CODE).as_posix()
        source = path.read_text()
        modules[rel] = len(source.splitlines())
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                functions[(rel, node.name)] = (lines, ast.get_docstring(node) or "")
    return modules, functions


def test_no_module_is_over_its_size_without_a_reason() -> None:
    modules, _ = _sizes()
    over = {rel: n for rel, n in modules.items() if n > MODULE_LINES}
    assert not sorted(set(over) - set(LONG_MODULES)), f"split these by subject: {over}"
    shrunk = sorted(rel for rel in LONG_MODULES if modules.get(rel, 0) <= MODULE_LINES)
    assert not shrunk, f"no longer over {MODULE_LINES} lines: remove {shrunk}"


def test_no_function_is_over_its_size_without_a_reason() -> None:
    _, functions = _sizes()
    over = {
        key: lines
        for key, (lines, doc) in functions.items()
        if lines > FUNCTION_LINES and REASON not in doc
    }
    unexplained = sorted(set(over) - set(LONG_FUNCTIONS))
    assert not unexplained, (
        f"over {FUNCTION_LINES} lines: split by step, or say '{REASON} …' in the docstring: "
        f"{[(k, over[k]) for k in unexplained]}"
    )
    shrunk = sorted(
        key for key in LONG_FUNCTIONS if functions.get(key, (0, ""))[0] <= FUNCTION_LINES
    )
    assert not shrunk, f"no longer over {FUNCTION_LINES} lines: remove {shrunk}"
