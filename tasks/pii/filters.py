"""The precision stage every finding passes after the recognisers (brands, titles and codes are
judged where they are found; this is what no recogniser can see alone).

A PERSON finding made only of the words that sign or open a message where a name would
(``Thanks,\\nAccounts Payable``, ``From: Billing``, ``Marketing here``, ``Good afternoon``:
:file:`lexicon/filters_not_names.txt`) names a team or greets, never a person.

A one-word PERSON finding right after a letter and "as in" or "for" is a spelling aid, the
word that says which letter was meant ("B as in Bravo", "D for David", "M as in Mary"), not
anyone's name.

A value spelled out after it, letter by letter ("Nkosi, N as in November, K as in Kilo, O S
I", "d.okafor@example.com, D for David, O K A F O R"), is part of the finding: the letters
spell the name.

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
# the words between a letter and the word that spells it out: "K as in Kilo", "D for David"
_AID_WORDS = r"\s+(?:as\s+in|for)\s+"
# letters spelled out after a value, with or without their spelling aids
_SPELLING = re.compile(rf"(?:[\s,.!-]+\p{{Lu}}(?:{_AID_WORDS}\p{{L}}+)?(?![\p{{L}}'’\d]))+")
_AID = re.compile(_AID_WORDS)
_LETTER = re.compile(r"(?<![\p{L}'’])\p{Lu}(?![\p{L}'’])")
_SPELLED_LETTERS = 3  # "O S I": fewer may be initials ("Tom B.")
# a letter and the words that spell it out: "K as in", "D for" (not "I" alone: "I for one")
_SPELLING_AID = re.compile(rf"(?<![\p{{L}}\d'’])(?!I\s)\p{{Lu}}{_AID_WORDS}$")


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
        person = r.entity_type == "PERSON"
        if r.end > r.start and not (
            person and (not_a_name(text[r.start : r.end]) or _spelling_aid(text, r.start, r.end))
        ):
            r.end = spelled_until(text, r.end)
            kept.append(r)
    return kept


def _spelling_aid(text: str, start: int, end: int) -> bool:
    """Whether the one-word ``text[start:end]`` spells out the letter before it (see the
    module)."""
    return " " not in text[start:end].strip() and bool(
        _SPELLING_AID.search(text, max(0, start - 12), start)
    )


def spelled_until(text: str, end: int) -> int:
    """Where a spelling of the value ending at ``end`` ends ("..., Q as in Queen, U I G L E Y":
    a spelling aid, or three letters at least); ``end`` where none follows."""
    m = _SPELLING.match(text, end)
    if not m or not (_AID.search(m.group()) or len(_LETTER.findall(m.group())) >= _SPELLED_LETTERS):
        return end
    return m.end()
