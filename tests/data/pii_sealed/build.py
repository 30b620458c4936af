"""Builds the sealed held-out PII sets (``{en,ko}_sealed_{1,2}.jsonl`` beside this file) from
``src/*.txt``, in the mark-up of ``../pii_handwritten/build.py`` (``⟦CODE:value⟧``, ``\\n``).

Set ``<lang>_sealed_<n>.jsonl`` holds ``src/<lang>_s<n>_*.txt``: labelled lines first, then the
PII-free lines of ``src/<lang>_s<n>_clean.txt`` (no entities: they measure what comes back
altered). The ``SEALED`` file in this folder tells ``flywheel pii-eval`` to report only totals
for these sets: nobody reads their misses line by line, so they stay text nobody tuned on.

    .venv/bin/python tests/data/pii_sealed/build.py
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

HERE = Path(__file__).parent
_spec = importlib.util.spec_from_file_location(
    "hw_build", HERE.parent / "pii_handwritten" / "build.py"
)
assert _spec and _spec.loader
_hw = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_hw)


def build(lang: str, n: int) -> None:
    """``src/<lang>_s<n>_*.txt`` -> ``<lang>_sealed_<n>.jsonl`` (clean lines last)."""
    sources = sorted(
        (HERE / "src").glob(f"{lang}_s{n}_*.txt"), key=lambda p: p.name.endswith("_clean.txt")
    )
    rows = []
    for src in sources:
        rows += [_hw.parse(x) for x in src.read_text(encoding="utf-8").splitlines() if x.strip()]
    with (HERE / f"{lang}_sealed_{n}.jsonl").open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    for lang in ("en", "ko"):
        for n in (1, 2):
            build(lang, n)
