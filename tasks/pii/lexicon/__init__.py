"""The anonymiser's word lists as data: one ``<name>.txt`` per list beside this module, its
first line a ``#`` comment saying where the words come from, then one entry per line.
:func:`word_list` reads a list once per process."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import regex as re

HERE = Path(__file__).resolve().parent


@cache
def word_list(name: str) -> tuple[str, ...]:
    """The entries of ``lexicon/<name>.txt`` in file order (the source line skipped)."""
    lines = (HERE / f"{name}.txt").read_text(encoding="utf-8").splitlines()
    return tuple(line for line in lines[1:] if line)


def alternatives(name: str) -> str:
    """The entries of ``lexicon/<name>.txt`` as one regular-expression alternation in file
    order (the first that matches wins), each entry a pattern of its own ("check-?in",
    "master[\\s_-]+card"): for the lists whose order or spelling a pattern relies on."""
    return "|".join(word_list(name))


def words_pattern(name: str) -> str:
    """The entries of ``lexicon/<name>.txt`` as one regular-expression alternation, longest
    first: a space in an entry is any spacing, ``_`` or ``-``, and a dot may end each word but
    the last ("pp. no", "ppt_no")."""
    entries = sorted(word_list(name), key=len, reverse=True)
    return "|".join(r"\.?[\s_-]*".join(re.escape(w) for w in e.split()) for e in entries)


# spaCy's English stop words, copied (their source line says from which release) so that
# importing a flow does not import spaCy, thinc and torch (3 CPU-s a process)
STOP_WORDS: frozenset[str] = frozenset(word_list("en_stop_words"))
