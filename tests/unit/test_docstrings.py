"""Every public function, class and method of a public class in flows/, tasks/, infra/ and
deployments/ has a docstring, so a user reading ``help()`` or the Prefect UI learns what it does.
Pure ``ast``: no project module is imported."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("flows", "tasks", "infra", "deployments")
Documented = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _undocumented(node: ast.AST, label: str) -> Iterator[str]:
    """Yield ``path:line:name`` for public definitions directly under ``node`` without a
    docstring, descending into public classes but not into function bodies."""
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, Documented) or child.name.startswith("_"):
            continue
        if ast.get_docstring(child) is None:
            yield f"{label}:{child.lineno}:{child.name}"
        if isinstance(child, ast.ClassDef):
            yield from _undocumented(child, label)


def missing_docstrings(paths: list[Path]) -> list[str]:
    """Return every undocumented public definition in ``paths``."""
    found: list[str] = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found.extend(_undocumented(tree, str(path.relative_to(ROOT))))
    return found


def test_finder_reports_undocumented_methods_but_not_private_or_nested() -> None:
    source = (
        'class Shown:\n    """Doc."""\n\n    def bare(self) -> None:\n        pass\n\n'
        "    def _private(self) -> None:\n        pass\n\n"
        'def public() -> None:\n    """Doc."""\n\n    def nested() -> None:\n        pass\n\n'
        "class Bare:\n    pass\n"
    )
    assert list(_undocumented(ast.parse(source), "mod.py")) == ["mod.py:4:bare", "mod.py:16:Bare"]


def test_every_public_definition_has_a_docstring() -> None:
    paths = sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))
    assert paths, "no source files found"
    missing = missing_docstrings(paths)
    assert not missing, "public definitions without a docstring:\n" + "\n".join(missing)
