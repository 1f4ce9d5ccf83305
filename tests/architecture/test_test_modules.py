"""Every module under leaseboard/ has a test module that imports it directly (`import m`,
`from m import x`, or `from package import m`), so a newcomer changing a module finds its
tests by grepping for its name, and a module nobody tests shows up here instead of in
production. New test modules mirror the code: tests/<package>/test_<module>.py.

Some modules are reached another way on purpose, by kind (KINDS, each with its reason and
checked where it can be); the rest of the exceptions are named one by one in ALLOWED, each
with its reason. ALLOWED may only shrink: a module listed there that has a direct test now
fails this test until its entry is removed.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CODE = REPO / "leaseboard"
TESTS = REPO / "tests"

# Kinds of module reached without an import by a test, and why that is the right way in.
KINDS = {
    "migration": "applied by the test database's migrate; makemigrations --check guards them",
    "app config": "apps.py: Django loads it from INSTALLED_APPS before any test runs",
    "entry point": (
        "asgi/wsgi/celery/urls and the settings package: loaded by the server, worker or test "
        "runner (each settings module is imported by tests/settings)"
    ),
    "view": (
        "views are thin and reached through the URL map by their app's tests/<app>/views, "
        "tests/api and tests/e2e (a test importing a view would skip the middleware it relies on)"
    ),
    "template tags": "loaded by templates with {% load %}, tested through the pages",
    "model": "imported through its app's models package, as Django loads models",
    "command": "run by name with call_command or manage.py (checked: its name is in a test)",
    "package": "an __init__ with no code of its own (docstring and re-exports only)",
}

# Module -> why it has no direct test module yet. Only shrinks (see the module docstring).
ALLOWED = {
    # Run by `dev.py demo`; tests/e2e/test_demo.py runs that end to end.
    "leaseboard.sandbox.management.commands.demo_setup": "run by dev.py demo (test_demo.py)",
    "leaseboard.sandbox.management.commands.simulate_agents": "run by dev.py demo (test_demo)",
    "leaseboard.sandbox.fleet": "dev.py demo's simulated agents, run by tests/e2e/test_demo.py",
    # The chart selector is being reworked in another branch: its direct test belongs with
    # that change. The consumer acts only when the Redis broker is lost under a running
    # worker holding messages, which tests/faults/test_broker.py makes happen to a real one.
    "leaseboard.dashboard.selectors.charts": "through the chart pages (tests/dashboard/views)",
    "leaseboard.sweeps.consumer": "a real worker losing Redis, tests/faults/test_broker.py",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def kind_of(path: Path) -> str | None:
    rel = path.relative_to(CODE).as_posix()
    parts = rel.split("/")
    if "migrations" in parts:
        return "migration"
    if parts[-1] == "apps.py":
        return "app config"
    if rel in {"asgi.py", "wsgi.py", "celery.py", "settings/__init__.py"} or parts[-1] == "urls.py":
        return "entry point"
    if "views" in parts[:-1] or parts[-1] == "views.py":
        return "view"
    if "templatetags" in parts[:-1]:
        return "template tags"
    if "models" in parts[:-1] or parts[-1] == "models.py":
        return "model"
    if parts[-3:-1] == ["management", "commands"] and parts[-1] != "__init__.py":
        return "command"
    if parts[-1] == "__init__.py" and _no_code(path):
        return "package"
    return None


def _no_code(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    return all(
        isinstance(node, ast.Import | ast.ImportFrom)
        or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        or (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", "") for t in node.targets] == ["__all__"]
        )
        for node in tree.body
    )


@cache
def _test_sources() -> tuple[tuple[Path, str], ...]:
    return tuple(
        (path, path.read_text())
        for path in sorted(TESTS.rglob("test_*.py"))
        if "node_modules" not in path.parts
    )


@cache
def imported_by_tests() -> frozenset[str]:
    names: set[str] = set()
    for _, source in _test_sources():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return frozenset(names)


def code_modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for path in sorted(CODE.rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def test_every_module_has_a_test_module_that_imports_it() -> None:
    imported = imported_by_tests()
    untested = [
        name
        for name, path in code_modules().items()
        if name not in imported and kind_of(path) is None and name not in ALLOWED
    ]
    assert not untested, (
        "no test module imports these (write tests/<package>/test_<module>.py, or say why "
        "in ALLOWED):\n" + "\n".join(untested)
    )


def test_the_allow_list_only_names_modules_that_exist_and_still_lack_a_direct_test() -> None:
    modules, imported = code_modules(), imported_by_tests()
    assert not [name for name in ALLOWED if name not in modules], "gone: remove from ALLOWED"
    tested = [name for name in ALLOWED if name in imported]
    assert not tested, f"now tested directly, remove from ALLOWED: {tested}"
    by_kind = [name for name in ALLOWED if kind_of(modules[name]) not in (None, "command")]
    assert not by_kind, f"already exempt by kind, remove from ALLOWED: {by_kind}"


def test_every_command_is_run_by_name_in_some_test() -> None:
    sources = "\n".join(source for _, source in _test_sources())
    unrun = [
        name
        for name, path in code_modules().items()
        if kind_of(path) == "command"
        and name not in ALLOWED
        and name not in imported_by_tests()
        and not re.search(rf"""["']{re.escape(path.stem)}["']""", sources)
    ]
    assert not unrun, f"no test runs these commands: {unrun}"


def test_every_kind_has_a_reason_and_the_kinds_are_recognised() -> None:
    assert all(KINDS.values())
    seen = {kind_of(path) for path in code_modules().values()} - {None}
    assert seen <= set(KINDS), seen - set(KINDS)
    assert kind_of(CODE / "core" / "apps.py") == "app config"
    assert kind_of(CODE / "dashboard" / "views" / "alerts.py") == "view"
    assert kind_of(CODE / "core" / "services" / "effects.py") is None
