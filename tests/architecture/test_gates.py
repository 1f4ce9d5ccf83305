"""Pages are gated by the act they perform, asked of the one authority table, and never by
naming a role (docs/design.md §9: "views and templates are gated by the act they perform,
asked of the one table, never by naming a role"). Roles may be scoped to queues: a role
named in a view or a template is a place where the scope would have to be added by hand.

- Every URL the dashboard, the settings and the takeover workflow serve is behind
  `act_required` (its `required_acts` are Act members), except the sign-in pages, which
  are for people not signed in yet.
- No HTTP module (views, template tags, page helpers) names a role: no role name as a
  string, no `Role.X`, no `role_required` / `has_role` / `has_perm` / `user.groups`.
- No template condition names a role, tests `in roles`, or reads `perms.`: templates ask
  `can.<act>` (leaseboard.web.roles.Can).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from leaseboard.domain.authority import Act, Role

REPO = Path(__file__).resolve().parents[2]
ROLE_NAMES = {role.value for role in Role}
GATED_APPS = ("leaseboard.dashboard.", "leaseboard.policy.", "leaseboard.takeovers.")
# Pages for people not signed in yet (or signing out): sign-in, sign-out, choosing a
# password through a one-time link, and the single sign-on round trip.
OPEN_VIEWS = {
    "leaseboard.web.signin",
    "leaseboard.dashboard.views.auth",
    "leaseboard.dashboard.views.password",
    "leaseboard.policy.views.sso",
}
BANNED_NAMES = {"role_required", "has_role", "has_perm", "VIEWER_ROLES"}


def _patterns(resolvers: list, prefix: str = "") -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for p in resolvers:
        if isinstance(p, URLResolver):
            out += _patterns(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            out.append((prefix + str(p.pattern), p.callback))
    return out


def _http_modules() -> list[Path]:
    found: list[Path] = []
    for path in sorted((REPO / "leaseboard").rglob("*.py")):
        rel = path.relative_to(REPO / "leaseboard").parts
        if "migrations" in rel or "management" in rel:
            continue
        http = "views" in rel or rel[-1] == "views.py" or "templatetags" in rel
        if http or rel[:2] in {("web", "pages.py"), ("web", "htmx.py")}:
            found.append(path)
    return found


def test_every_gated_page_is_behind_act_required() -> None:
    ungated = []
    gated = 0
    for route, view in _patterns(get_resolver().url_patterns):
        module = getattr(view, "__module__", "")
        if not module.startswith(GATED_APPS) or module in OPEN_VIEWS:
            continue
        acts = getattr(view, "required_acts", None)
        if not acts or not all(isinstance(a, Act) for a in acts):
            ungated.append(f"{route} -> {module}.{getattr(view, '__name__', view)}")
        else:
            gated += 1
    assert not ungated, "pages not behind act_required: " + ", ".join(ungated)
    assert gated > 50  # the check saw the pages (a broken walk would pass vacuously)


def _role_mentions(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in ROLE_NAMES:
            found.append(f"line {node.lineno}: {node.value!r}")
        elif isinstance(node, ast.Name) and node.id in BANNED_NAMES:
            found.append(f"line {node.lineno}: {node.id}")
        elif isinstance(node, ast.Attribute):
            if node.attr in BANNED_NAMES or node.attr == "groups":
                found.append(f"line {node.lineno}: .{node.attr}")
            elif isinstance(node.value, ast.Name) and node.value.id == "Role":
                found.append(f"line {node.lineno}: Role.{node.attr}")
        elif isinstance(node, ast.alias) and node.name in BANNED_NAMES | {"Role"}:
            found.append(f"import {node.name}")
    return found


@pytest.mark.parametrize("path", _http_modules(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_http_module_names_a_role(path: Path) -> None:
    found = _role_mentions(ast.parse(path.read_text(), str(path)))
    assert not found, f"{path.relative_to(REPO)} decides by role: {found}; ask the table"


def test_the_scan_finds_what_it_forbids() -> None:
    code = 'from x import role_required, Role\n@role_required("operator")\ndef v(r): ...\n'
    code += "ok = Role.ADMIN in roles or r.user.has_perm('p') or r.user.groups.all()\n"
    found = _role_mentions(ast.parse(code))
    assert len(found) == 7, found


CONDITION = re.compile(r"{%-?\s*(?:if|elif)\b(.*?)-?%}", re.S)
ROLE_LITERAL = r"""["'](?:""" + "|".join(sorted(ROLE_NAMES)) + r""")["']"""
ROLE_IN_CONDITION = re.compile(ROLE_LITERAL + r"|\bin\s+roles\b|\broles\.|\bperms\.|\.groups\b")


def _template_conditions(text: str) -> list[str]:
    return [
        m.group(1).strip() for m in CONDITION.finditer(text) if ROLE_IN_CONDITION.search(m.group(1))
    ]


def test_no_template_condition_names_a_role() -> None:
    templates = sorted((REPO / "templates").rglob("*.html"))
    assert len(templates) > 20
    found = {
        str(t.relative_to(REPO)): conds
        for t in templates
        if (conds := _template_conditions(t.read_text()))
    }
    assert not found, f"template conditions that name a role (ask `can.<act>`): {found}"


def test_the_template_scan_finds_what_it_forbids() -> None:
    text = (
        '{% if "operator" in roles %}x{% endif %}{% elif perms.takeovers.break_glass %}'
        "{% if 'admin' in user_roles %}{% if can.revoke %}{% if roles %}"
    )
    assert len(_template_conditions(text)) == 3
