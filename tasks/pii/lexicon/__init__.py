"""The anonymiser's word lists as data: one ``<name>.txt`` per list beside this module, its
first line a ``#`` comment saying where the words come from, then one entry per line.
:func:`word_list` reads a list once per process."""

from __future__ import annotations

from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent


@cache
def word_list(name: str) -> tuple[str, ...]:
    """The entries of ``lexicon/<name>.txt`` in file order (the source line skipped)."""
    lines = (HERE / f"{name}.txt").read_text(encoding="utf-8").splitlines()
    return tuple(line for line in lines[1:] if line)


# spaCy's English stop words, copied (their source line says from which release) so that
# importing a flow does not import spaCy, thinc and torch (3 CPU-s a process)
STOP_WORDS: frozenset[str] = frozenset(word_list("en_stop_words"))
