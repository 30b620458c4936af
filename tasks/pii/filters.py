"""The precision stage every finding passes after the recognisers (brands, titles and codes are
judged where they are found; this is what no recogniser can see alone).

A PERSON finding made only of the words that sign or open a message where a name would
(``Thanks,\\nAccounts Payable``, ``From: Billing``, ``Marketing here``, ``Good afternoon``:
:file:`lexicon/filters_not_names.txt`) names a team or greets, never a person.
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


def not_a_name(span: str) -> bool:
    """Whether every word of a name finding is a team's, a department's or a greeting's."""
    words = [w.lower() for w in _WORD.findall(span)]
    return bool(words) and all(w in _NOT_NAMES for w in words)


def precision_filter(text: str, found: Sequence[RecognizerResult]) -> list[RecognizerResult]:
    """``found`` without what is no one's (see the module)."""
    return [
        r for r in found if not (r.entity_type == "PERSON" and not_a_name(text[r.start : r.end]))
    ]
