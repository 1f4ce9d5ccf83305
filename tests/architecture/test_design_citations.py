"""Citations of the design stay true: every `docs/design.md §N` in the code, the tests and
the docs names a section docs/design.md has, every `<doc>.md §N` names a document in the
repository and a numbered heading in it, and nothing cites a design document that is not
in the repository (the bare upper-case name the code used before docs/design.md existed).
Links in the README and docs/ must reach a file of the repository, and an anchor a heading
of the page it names.

Landed migrations are never edited, not even their docstrings, so in a migration the old
form of the citation is allowed; the section it names must still exist in docs/design.md,
whose numbers are the old document's.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DESIGN = REPO / "docs" / "design.md"
THIS = Path(__file__).resolve()

# Where citations live: the code, the tests, the shipped clients, the benches, the docs.
ROOTS = ("leaseboard", "tests", "clients", "bench", "docs", "templates", "static", ".ci")
TOP_FILES = ("README.md", "dev.py", "Makefile", "pyproject.toml")
SKIP_DIRS = {"node_modules", "__pycache__", ".venv", ".pytest_cache", ".mypy_cache", "build"}
TEXT_SUFFIXES = {".py", ".md", ".html", ".txt", ".toml", ".js", ".css", ".cfg", ".ini", ".env"}

SECTION = r"[0-9]+[a-z]?"
# `docs/design.md §4`, `design.md §5 and §11`, `deployment.md §3a`, `docs/design.md §8, §11`.
CITATION = re.compile(
    rf"(?P<doc>[\w./-]*\w\.md)(?:#[\w-]+)?,?\s*§\s*(?P<first>{SECTION})"
    rf"(?P<more>(?:\s*(?:,|and|or)\s*§\s*{SECTION})*)"
)
MORE = re.compile(rf"§\s*({SECTION})")
# The design document the code cited before docs/design.md: upper case, as a word.
LEGACY = re.compile(r"\bDESIGN\b")
LEGACY_SECTION = re.compile(rf"\bDESIGN\b(?:\.md)?,?\s*§\s*({SECTION})")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
NUMBERED = re.compile(rf"^({SECTION})\.\s")
LINK = re.compile(r"\]\(([^)\s]+)\)")


@dataclass(frozen=True)
class Cited:
    doc: str
    section: str


def citations(text: str) -> list[Cited]:
    """Every `<doc>.md §N` in `text`, one per section named."""
    found = []
    for m in CITATION.finditer(text):
        sections = [m["first"], *MORE.findall(m["more"])]
        found += [Cited(m["doc"], section) for section in sections]
    return found


def sections_of(path: Path) -> set[str]:
    """The numbers of a Markdown file's numbered headings (`## 5. Fencing epoch` -> "5")."""
    numbers = set()
    for _, title in HEADING.findall(path.read_text()):
        m = NUMBERED.match(title)
        if m:
            numbers.add(m[1])
    return numbers


def slug(title: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    title = re.sub(r"`|\*\*|\[|\]\([^)]*\)", "", title).strip().lower()
    kept = "".join(ch for ch in title if ch in " -_" or unicodedata.category(ch)[0] in {"L", "N"})
    return kept.replace(" ", "-")


@cache
def anchors_of(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for _, title in HEADING.findall(path.read_text()):
        base = slug(title)
        n = seen.get(base, 0)
        seen[base] = n + 1
        anchors.add(base if n == 0 else f"{base}-{n}")
    return frozenset(anchors)


def resolve(doc: str, citing: Path) -> Path | None:
    """The repository file a citation names: from the repository's root, from the citing
    file's folder, or (a bare name) in docs/."""
    for base in (REPO, citing.parent, REPO / "docs"):
        path = (base / doc).resolve()
        if path.is_file() and REPO in path.parents:
            return path
    return None


def problems_in(text: str, citing: Path) -> list[str]:
    """What is wrong with the citations in one file's text."""
    out = []
    for cited in citations(text):
        path = resolve(cited.doc, citing)
        if path is None:
            out.append(f"cites {cited.doc} §{cited.section}: no such file in the repository")
        elif cited.section not in sections_of(path):
            out.append(f"cites {cited.doc} §{cited.section}: no such section in {cited.doc}")
    if "migrations" in citing.parts:
        for section in LEGACY_SECTION.findall(text):
            if section not in sections_of(DESIGN):
                out.append(f"cites the old design §{section}: docs/design.md has no such section")
    else:
        for m in LEGACY.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            out.append(
                f"line {line}: cites DESIGN, which is not in the repository; "
                "cite docs/design.md §N (or the doc that says it)"
            )
    return out


def cited_files() -> list[Path]:
    files = [REPO / name for name in TOP_FILES if (REPO / name).is_file()]
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*")):
            rel = path.relative_to(REPO)
            if SKIP_DIRS & set(rel.parts) or not path.is_file() or path.resolve() == THIS:
                continue
            if path.suffix in TEXT_SUFFIXES or path.name == "run":
                files.append(path)
    return files


def test_the_design_keeps_the_contracts_section_numbers():
    numbers = sorted(int(n) for n in sections_of(DESIGN))
    # The code's citations were written against sections 1-14; the numbers must stay.
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 14, numbers


def test_every_citation_names_a_document_and_a_section_that_exist():
    problems = []
    design_citations = 0
    for path in cited_files():
        text = path.read_text(errors="replace")
        design_citations += sum(1 for c in citations(text) if c.doc.endswith("design.md"))
        problems += [f"{path.relative_to(REPO)}: {p}" for p in problems_in(text, path)]
    assert not problems, "\n".join(problems)
    # A pattern that silently stopped matching would pass everything: the code cites the
    # design some 50 times.
    assert design_citations >= 40


def test_links_in_the_readme_and_docs_reach_files_and_headings_of_the_repository():
    broken = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            path = (page.parent / file_part).resolve() if file_part else page
            if not path.exists() or REPO not in path.parents:
                broken.append(f"{page.relative_to(REPO)}: {target}: no such file")
            elif anchor and path.suffix == ".md" and anchor not in anchors_of(path):
                broken.append(f"{page.relative_to(REPO)}: {target}: no such heading")
    assert not broken, "\n".join(broken)


# -- the checks themselves can fail -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(docs/design.md §3)", [("docs/design.md", "3")]),
        ("docs/design.md §4 and §11", [("docs/design.md", "4"), ("docs/design.md", "11")]),
        ("docs/design.md §8, §11.", [("docs/design.md", "8"), ("docs/design.md", "11")]),
        ("(docs/deployment.md §3a)", [("docs/deployment.md", "3a")]),
        ("RFC 7517 §5 and a design without a file", []),
    ],
)
def test_citations_are_read_with_every_section_they_name(text, expected):
    assert [(c.doc, c.section) for c in citations(text)] == expected


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("see docs/design.md §15", "§15: no such section"),
        ("see docs/nowhere.md §1", "no such file"),
        ("docs/deployment.md §3b", "§3b: no such section"),
        ("# DESIGN §5: the fence", "cites DESIGN"),
        ("the refusal record DESIGN asks for", "cites DESIGN"),
    ],
)
def test_a_wrong_citation_is_reported(text, fault):
    found = problems_in(text, REPO / "leaseboard" / "example.py")
    assert any(fault in problem for problem in found), found


def test_a_landed_migration_may_keep_the_old_form_only_for_a_section_that_exists():
    migration = REPO / "leaseboard" / "core" / "migrations" / "0099_example.py"
    assert problems_in('"""Roles (DESIGN §9)."""', migration) == []
    assert problems_in('"""Roles (DESIGN §99)."""', migration) != []
