"""The words spaCy's English model met in training: its string store as loaded, before any
text adds to it. A word it never met ("Jayawardena", "tendai", "Adeyinka") is rare in English
text; next to a person's slot it is far more likely a name from a tradition the name lexicon
covers thinly than a word (see :mod:`tasks.pii.names.objects`)."""

from __future__ import annotations

from typing import Any

# id of a loaded pipeline's vocabulary -> the lower-cased strings it was loaded with
_SEEN: dict[int, frozenset[str]] = {}


def remember(nlp: Any) -> None:
    """Record what a freshly loaded pipeline's vocabulary holds (call before it runs)."""
    _SEEN[id(nlp.vocab)] = frozenset(s.lower() for s in nlp.vocab.strings)


def unseen(tok: Any) -> bool:
    """Whether the model never met the token's word (``False`` for a pipeline not
    :func:`remember`-ed: no evidence either way)."""
    seen = _SEEN.get(id(tok.vocab))
    return seen is not None and tok.lower_ not in seen
