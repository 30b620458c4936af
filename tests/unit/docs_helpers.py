"""What the documentation tests (test_docs.py, test_docs_reference.py) read: the pages and their
code segments, the code they are checked against, the ``flywheel`` parser's commands, the
anchors MkDocs gives headings, and docs/hooks.py loaded as MkDocs loads it."""

from __future__ import annotations

import argparse
import importlib.util
import re
from functools import cache
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
PACKAGES = ("flows", "tasks", "infra", "deployments", "tests")


def text_of(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def code_segments(text: str) -> list[str]:
    """Every line of a fenced code block and every inline code span, where commands, paths
    and names are written."""
    segments: list[str] = []
    prose: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        (segments if fenced else prose).append(line)
    for match in re.finditer(r"(`+)(.+?)\1", "\n".join(prose), re.S):
        segments.append(match.group(2).strip())
    return segments


def all_segments() -> list[tuple[str, str]]:
    """(page, code segment) for every page."""
    return [(str(p.relative_to(ROOT)), s) for p in PAGES for s in code_segments(text_of(p))]


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser of each ``flywheel`` command."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@cache
def hooks() -> ModuleType:
    """docs/hooks.py, the generator of the reference pages."""
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def code_files() -> list[Path]:
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    return [*files, ROOT / "Makefile", *(ROOT / "infra").rglob("*.yml")]


@cache
def code_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in code_files())


def slugs(page: Path) -> set[str]:
    """The anchors MkDocs gives the page's headings (toc's slugify; ``{#id}`` attributes)."""
    from markdown.extensions.toc import slugify

    found = set()
    fenced = False
    for line in text_of(page).splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if fenced or not line.startswith("#"):
            continue
        heading = line.lstrip("#").strip()
        if explicit := re.search(r"\{#([\w-]+)\}\s*$", heading):
            found.add(explicit.group(1))
            continue
        heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
        found.add(slugify(heading, "-"))
    return found
