"""Import layers and import cycles of `leaseboard/` and of the packages it ships in
`clients/python/src` (the leaseboard-client distribution), read from the source with `ast`.

Every import counts wherever it is written: at module level, inside a function (a lazy
import is still a dependency), and `importlib.import_module` / `import_string` / `include`
calls with a literal "leaseboard." name. Imports under `if TYPE_CHECKING:` count for the
layers (a type is a dependency too) but not for cycles, because they never run.

Layers, lowest first. A module may import modules of the layers in its row, never others:

| layer     | modules                                                 | may import              |
|-----------|---------------------------------------------------------|-------------------------|
| tokens    | leaseboard_recipient.tokens (the fencing token format,  | tokens                  |
|           | one definition for the server that signs and the        |                         |
|           | recipients that verify)                                 |                         |
| domain    | leaseboard.domain (pure: receives `now`, no framework)  | domain, tokens          |
| client    | leaseboard_client (agent SDK, any Python agent)         | client                  |
| recipient | leaseboard_recipient (recipient-side guard)             | recipient, tokens       |
| settings  | leaseboard.settings (read it via django.conf.settings)  | settings, domain        |
|           | and leaseboard.envconf (its environment readers)        |                         |
| telemetry | leaseboard.telemetry (OpenTelemetry's process set-up:   | telemetry, client       |
|           | the provider from leaseboard_client.telemetry and the   |                         |
|           | instrumentation packages; run by wsgi, asgi, celery)    |                         |
| core      | leaseboard.core: models, services, selectors, sql,      | core, domain, tokens,   |
|           | signals, clock (core.sql runs the recipient guard's     | recipient               |
|           | own statement)                                          |                         |
| workflow  | leaseboard.takeovers and leaseboard.policy (settings,   | + core                  |
|           | config as code), except their HTTP modules              |                         |
| sweeps    | leaseboard.sweeps and leaseboard.celery (the Celery app | + workflow, telemetry   |
|           | that runs the sweeps' tasks; sweeps call the takeover   |                         |
|           | expiry step, so takeovers never import sweeps)          |                         |
| web       | leaseboard.api, .dashboard, .web, .sandbox, and every   | + sweeps, client,       |
|           | app's HTTP modules (views, forms, urls, templatetags)   |   recipient             |
| entry     | leaseboard (package), .urls, .wsgi, .asgi               | everything              |

("+ x" means the row above plus x.) A module that fits no row fails the test: add it to the
table. The shipped packages (tokens, client, recipient) import nothing of `leaseboard`
(they install without it). Third-party bans: domain and tokens import no django, celery,
kombu, redis, psycopg or httpx; client and recipient import no django, celery or kombu —
except that `leaseboard_recipient.django_guard`, the optional Django adapter, imports Django
inside its functions (so `import leaseboard_recipient` works without Django). Optional
extras stay optional: only `leaseboard_client.langchain` imports langchain_core, only the
gateway (`leaseboard_client.mcp`, extra `[mcp]`) imports the MCP SDK, OpenTelemetry is
imported only where tracing lives, and the agent SDK never imports cryptography (the
`[recipient]` extra).

Cycles: no strongly connected component of more than one module, and none between
packages (leaseboard.<package>, with leaseboard.celery counted in leaseboard.sweeps, and
each shipped package whole).
"""

from __future__ import annotations

import ast
import itertools
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "clients" / "python" / "src"
ROOTS = (REPO / "leaseboard", SHIPPED / "leaseboard_client", SHIPPED / "leaseboard_recipient")
OWN = ("leaseboard", "leaseboard_client", "leaseboard_recipient")

LAYER_OF_PACKAGE = {
    "domain": "domain",
    "settings": "settings",
    "envconf": "settings",
    "telemetry": "telemetry",
    "core": "core",
    "takeovers": "workflow",
    "policy": "workflow",
    "sweeps": "sweeps",
    "celery": "sweeps",
    "api": "web",
    "dashboard": "web",
    "web": "web",
    "sandbox": "web",
    "urls": "entry",
    "wsgi": "entry",
    "asgi": "entry",
}
HTTP_MODULES = {"views", "forms", "urls", "templatetags"}

_BELOW_WEB = {"sweeps", "workflow", "core", "domain"}
MAY_IMPORT: dict[str, set[str]] = {
    "tokens": {"tokens"},
    "domain": {"domain", "tokens"},
    "client": {"client"},
    "recipient": {"recipient", "tokens"},
    "settings": {"settings", "domain", "tokens"},
    "telemetry": {"telemetry", "client"},
    "core": {"core", "domain", "tokens", "recipient"},
    "workflow": {"workflow", "core", "domain", "tokens", "recipient"},
    "sweeps": {"sweeps", "workflow", "core", "domain", "tokens", "recipient", "telemetry"},
    "web": {"web", "client", "recipient", "tokens"} | _BELOW_WEB,
    "entry": set(LAYER_OF_PACKAGE.values()) | {"entry", "client", "recipient", "tokens"},
}
_PURE = {"django", "celery", "kombu", "redis", "psycopg", "httpx"}
FORBIDDEN_LIBRARIES = {
    "tokens": _PURE,
    "domain": _PURE,
    "client": {"django", "celery", "kombu", "cryptography"},
    "recipient": {"django", "celery", "kombu"},
}
GATEWAY = [
    f"leaseboard_client.mcp{m}"
    for m in ("", ".approvals", ".config", ".gateway", ".refusals", ".server", ".upstreams")
]
# Optional extras: (library) -> the only modules that may import it.
EXTRA_ONLY = {
    "langchain_core": {"leaseboard_client.langchain"},
    "langgraph": set(),  # the example uses it; the SDK itself never does
    "mcp": set(GATEWAY),
    "mcp_types": set(GATEWAY),
    "anyio": set(GATEWAY),
    "uvicorn": {"leaseboard_client.mcp.server"},
    "opentelemetry": {
        *GATEWAY,
        "leaseboard_client.telemetry",
        "leaseboard_recipient.tracing",
        "leaseboard.core.tracing",
        "leaseboard.telemetry",
    },
}
# (module, library): allowed inside functions only.
LAZY_LIBRARY_ALLOWED = {("leaseboard_recipient.django_guard", "django")}

DYNAMIC_IMPORTERS = {"import_module", "import_string", "include"}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # a leaseboard module, or a third-party top-level name
    line: int
    in_function: bool
    type_only: bool

    def __str__(self) -> str:
        return f"{self.source}:{self.line} imports {self.target}"


def _own(name: str) -> bool:
    return name.split(".")[0] in OWN


def module_names(*roots: Path) -> dict[str, Path]:
    names = {}
    for path in sorted(p for root in roots for p in root.rglob("*.py")):
        root = next(r for r in roots if r in path.parents)
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _resolve(name: str, modules: dict[str, Path]) -> str:
    """The module an import of `name` loads: the longest existing prefix."""
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, modules: dict[str, Path]) -> None:
        self.module, self.modules = module, modules
        self.package = module if is_package else module.rpartition(".")[0]
        self.found: list[Import] = []
        self.depth = 0
        self.type_only = 0

    def _add(self, name: str, line: int) -> None:
        if _own(name):
            target = _resolve(name, self.modules)
            if target == self.module:
                return
        else:
            target = name.split(".")[0]
        self.found.append(Import(self.module, target, line, self.depth > 0, self.type_only > 0))

    def _function(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self.type_only += 1
            for child in node.body:
                self.visit(child)
            self.type_only -= 1
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            parts = self.package.split(".")
            parts = parts[: len(parts) - node.level + 1]
            base = ".".join(parts + ([base] if base else []))
        for alias in node.names:
            # `from package import module` loads the module; `from module import name` the module.
            full = f"{base}.{alias.name}"
            self._add(full if full in self.modules else base, node.lineno)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in DYNAMIC_IMPORTERS and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                if _own(arg.value):
                    self._add(arg.value, node.lineno)
        self.generic_visit(node)


def collect_imports(*roots: Path) -> tuple[dict[str, Path], list[Import]]:
    modules = module_names(*roots)
    imports: list[Import] = []
    for module, path in modules.items():
        collector = _Collector(module, path.name == "__init__.py", modules)
        collector.visit(ast.parse(path.read_text(), filename=str(path)))
        imports.extend(collector.found)
    return modules, imports


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if module == "leaseboard_recipient.tokens":
        return "tokens"
    if parts[0] in ("leaseboard_client", "leaseboard_recipient"):
        return parts[0].removeprefix("leaseboard_")
    if parts == ["leaseboard"]:
        return "entry"
    if len(parts) > 2 and parts[2] in HTTP_MODULES:
        return "web"
    return LAYER_OF_PACKAGE.get(parts[1])


def package_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[0] != "leaseboard":
        return parts[0]
    return "leaseboard." + ("sweeps" if parts[1] == "celery" else parts[1])


def layer_violations(modules: Iterable[str], imports: Iterable[Import]) -> list[str]:
    problems = [f"{m} fits no layer: add it to the table" for m in modules if not layer_of(m)]
    for imp in imports:
        source = layer_of(imp.source)
        if source is None:
            continue
        if _own(imp.target):
            target = layer_of(imp.target)
            if target not in MAY_IMPORT[source]:
                problems.append(f"{imp} ({source} may not import {target})")
        elif imp.target in EXTRA_ONLY and imp.source not in EXTRA_ONLY[imp.target]:
            problems.append(f"{imp} (an optional extra: only {sorted(EXTRA_ONLY[imp.target])})")
        elif imp.target in FORBIDDEN_LIBRARIES.get(source, ()):
            if imp.in_function and (imp.source, imp.target) in LAZY_LIBRARY_ALLOWED:
                continue
            problems.append(f"{imp} ({source} imports no {imp.target})")
    return problems


def strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm: the components with more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = itertools.count()

    def visit(node: str) -> None:
        index[node] = low[node] = next(counter)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for node in sorted(set(edges) | {n for targets in edges.values() for n in targets}):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return found


def runtime_edges(imports: Iterable[Import], unit=lambda module: module) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for imp in imports:
        if imp.type_only or not _own(imp.target):
            continue
        source, target = unit(imp.source), unit(imp.target)
        if source != target:
            edges.setdefault(source, set()).add(target)
    return edges


def explain(component: set[str], imports: Iterable[Import], unit=lambda m: m) -> str:
    lines = {
        str(imp)
        for imp in imports
        if not imp.type_only
        and _own(imp.target)
        and unit(imp.source) in component
        and unit(imp.target) in component
        and unit(imp.source) != unit(imp.target)
    }
    return f"cycle {sorted(component)}:\n    " + "\n    ".join(sorted(lines))


@pytest.fixture(scope="module")
def tree() -> tuple[dict[str, Path], list[Import]]:
    return collect_imports(*ROOTS)


# --- the real tree -------------------------------------------------------------------------


def test_no_module_imports_a_higher_layer(tree):
    modules, imports = tree
    assert layer_violations(modules, imports) == []


def test_no_import_cycle_between_modules(tree):
    _, imports = tree
    cycles = strongly_connected(runtime_edges(imports))
    assert [explain(c, imports) for c in cycles] == []


def test_no_import_cycle_between_packages(tree):
    _, imports = tree
    cycles = strongly_connected(runtime_edges(imports, package_of))
    assert [explain(c, imports, package_of) for c in cycles] == []


# --- the checker itself, on a small tree it must fault --------------------------------------


def write(root: Path, files: dict[str, str]) -> list[Path]:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return [root / name for name in OWN if (root / name).exists()]


def test_the_checker_finds_upward_imports_lazy_ones_included(tmp_path):
    root = write(
        tmp_path,
        {
            "leaseboard/__init__.py": "",
            "leaseboard/domain/__init__.py": "",
            "leaseboard/domain/rules.py": "def f():\n    import django.db\n",
            "leaseboard/core/__init__.py": "",
            "leaseboard/core/services.py": (
                "from leaseboard.domain import rules\n"
                "def later():\n    from leaseboard.sweeps.tasks import sweep\n"
            ),
            "leaseboard/sweeps/__init__.py": "",
            "leaseboard/sweeps/tasks.py": "from ..takeovers import sweep\n",
            "leaseboard/takeovers/__init__.py": "",
            "leaseboard/takeovers/sweep.py": "",
            "leaseboard/takeovers/views.py": "from leaseboard.dashboard import roles\n",
            "leaseboard/dashboard/__init__.py": "",
            "leaseboard/dashboard/roles.py": "",
            "leaseboard_client/__init__.py": "from leaseboard.core import services\n",
            "leaseboard_client/agents.py": "import langchain_core.tools\n",
            "leaseboard_client/langchain.py": "from langchain_core.tools import BaseTool\n",
            "leaseboard_recipient/__init__.py": "import django\n",
            "leaseboard_recipient/tokens.py": "from leaseboard_recipient import guard\n",
            "leaseboard_recipient/guard.py": "",
            "leaseboard_recipient/django_guard.py": "def g():\n    import django.http\n",
            "leaseboard/mystery.py": "",
        },
    )
    modules, imports = collect_imports(*root)
    problems = layer_violations(modules, imports)
    assert sorted(problems) == sorted(
        [
            "leaseboard.mystery fits no layer: add it to the table",
            "leaseboard.domain.rules:2 imports django (domain imports no django)",
            "leaseboard.core.services:3 imports leaseboard.sweeps.tasks "
            "(core may not import sweeps)",
            "leaseboard_client:1 imports leaseboard.core.services (client may not import core)",
            "leaseboard_client.agents:1 imports langchain_core "
            "(an optional extra: only ['leaseboard_client.langchain'])",
            "leaseboard_recipient:1 imports django (recipient imports no django)",
            "leaseboard_recipient.tokens:1 imports leaseboard_recipient.guard "
            "(tokens may not import recipient)",
        ]
    )  # sweeps -> takeovers, takeovers.views -> dashboard, the adapter's langchain_core and
    # the lazy django_guard pass


def test_the_checker_finds_cycles_but_not_type_only_ones(tmp_path):
    root = write(
        tmp_path,
        {
            "leaseboard/__init__.py": "",
            "leaseboard/sweeps/__init__.py": "",
            "leaseboard/sweeps/services.py": "def f():\n    from leaseboard.sweeps import tasks\n",
            "leaseboard/sweeps/tasks.py": "from leaseboard.sweeps import notifications\n",
            "leaseboard/sweeps/notifications.py": "from leaseboard.sweeps.services import f\n",
            "leaseboard_client/__init__.py": "",
            "leaseboard_client/api.py": "from leaseboard_client import holding\n",
            "leaseboard_client/holding.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from leaseboard_client.api import Client\n"
            ),
            "leaseboard/core/__init__.py": "",
            "leaseboard/core/a.py": "import leaseboard.dashboard.b\n",
            "leaseboard/dashboard/__init__.py": "",
            "leaseboard/dashboard/b.py": "",
            "leaseboard/dashboard/c.py": "from leaseboard.core import a\n",
            "leaseboard/core/d.py": "from leaseboard.dashboard import c\n",
        },
    )
    _, imports = collect_imports(*root)
    modules_cycles = strongly_connected(runtime_edges(imports))
    assert modules_cycles == [
        {"leaseboard.sweeps.services", "leaseboard.sweeps.tasks", "leaseboard.sweeps.notifications"}
    ]
    package_cycles = strongly_connected(runtime_edges(imports, package_of))
    assert package_cycles == [{"leaseboard.core", "leaseboard.dashboard"}]
