"""The precision stage every finding passes after the recognisers (brands, titles and codes are
judged where they are found; this is what no recogniser can see alone).

A PERSON finding made only of the words that sign or open a message where a name would
(``Thanks,\\nAccounts Payable``, ``From: Billing``, ``Marketing here``, ``Good afternoon``:
:file:`lexicon/filters_not_names.txt`) names a team or greets, never a person.

A name or a place never starts or ends with a quotation mark: one the NER took with it
(``VALUES (12, 'Marta Nowak', ...``, ``surname = 'Haddad';``, ``James' order``) is left out of
the finding, so the replacement keeps the quotes of the SQL, code or prose around it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import regex as re

from tasks.pii.lexicon import word_list

if TYPE_CHECKING:
    from presidio_analyzer import RecognizerResult

_NOT_NAMES = frozenset(word_list("filters_not_names"))
_WORD = re.compile(r"\p{L}[\p{L}'’]*")
_QUOTES = "'\"‘’“”`´"
_NAMED = frozenset(["PERSON", "LOCATION"])


def not_a_name(span: str) -> bool:
    """Whether every word of a name finding is a team's, a department's or a greeting's."""
    words = [w.lower() for w in _WORD.findall(span)]
    return bool(words) and all(w in _NOT_NAMES for w in words)


def precision_filter(text: str, found: Sequence[RecognizerResult]) -> list[RecognizerResult]:
    """``found`` without what is no one's, names and places without the quotation marks at
    their ends (see the module)."""
    kept = []
    for r in found:
        if r.entity_type in _NAMED:
            while r.end > r.start and text[r.end - 1] in _QUOTES:
                r.end -= 1
            while r.start < r.end and text[r.start] in _QUOTES:
                r.start += 1
        if r.end > r.start and not (
            r.entity_type == "PERSON" and not_a_name(text[r.start : r.end])
        ):
            kept.append(r)
    return kept
