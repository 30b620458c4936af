"""Flows orchestrate, tasks work: every ``@flow`` in flows/ reads like the loop diagram and fits
on a screen (at most :data:`MAX_FLOW_LINES` lines from its ``def`` to its last line, signature
and docstring included, the decorator not), and flows/ holds flows only (every module but
``__init__`` defines one). Result building, counting, summaries and reporting live in
``tasks/<stage>/``. Pure ``ast``: no project module is imported."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FLOWS = ROOT / "flows"
MAX_FLOW_LINES = 60


def _is_flow_decorator(node: ast.expr) -> bool:
    """``@flow``, ``@flow(...)``, ``@prefect.flow`` or ``@prefect.flow(...)``."""
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr == "flow"
    return isinstance(target, ast.Name) and target.id == "flow"


def flow_lengths(path: Path) -> dict[str, int]:
    """Each ``@flow`` function of ``path`` and its length in lines, from the ``def`` line to its
    last line (signature and docstring included, decorators not)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name: (node.end_lineno or node.lineno) - node.lineno + 1
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and any(_is_flow_decorator(d) for d in node.decorator_list)
    }


def flow_modules() -> list[Path]:
    """The modules of flows/ (``__init__`` aside)."""
    return sorted(p for p in FLOWS.glob("*.py") if p.name != "__init__.py")


def test_the_measure_counts_signature_and_docstring_not_the_decorator(tmp_path: Path) -> None:
    source = (
        "@flow(name='x')\ndef x(\n    a: int,\n) -> None:\n    '''Doc.'''\n    return None\n\n"
        "@prefect.flow\ndef y() -> None:\n    pass\n\ndef helper() -> None:\n    pass\n"
    )
    path = tmp_path / "probe.py"
    path.write_text(source, encoding="utf-8")
    assert flow_lengths(path) == {"x": 5, "y": 2}


def test_every_flow_fits_on_a_screen() -> None:
    lengths = {f"{p.name}:{name}": n for p in flow_modules() for name, n in flow_lengths(p).items()}
    assert lengths, "no @flow found in flows/"
    long = {name: n for name, n in lengths.items() if n > MAX_FLOW_LINES}
    assert not long, (
        f"@flow functions longer than {MAX_FLOW_LINES} lines (move result building, counting, "
        f"summaries and reporting into tasks/<stage>/): {long}"
    )


def test_flows_holds_flows_only() -> None:
    bare = [p.name for p in flow_modules() if not flow_lengths(p)]
    assert not bare, f"modules in flows/ without a @flow (move them to tasks/ or infra/): {bare}"
