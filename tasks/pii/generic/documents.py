"""A document's number found once names its like elsewhere in the same text.

People give more than one number of the same document in one message: a correction ("it
should be 548213370 not 548213307"), a family's or a group's ("533412987 (mine) and 561190284
(my wife's)", "548213307 belongs to Tom and 561190284 to Lucy"), a doubt ("548213307 or maybe
548213370"). The document's word stands before the first number only, so the rules that read
the words before a value take that one. Here, once a recogniser has found a passport, a
driving licence or a medical record number in a text, every other code of the same shape in
that text (the same letters, digits and separators in the same places: ``999999999``,
``AA9999999``) is that document too, unless another thing's word claims it: an order, booking
or ticket word right before it, as its first group or as the subject of the clause that names
it ("your booking reference is 561190284") or right after it ("561190284 is my ticket"). A
shape too loose to tell a document from a count (fewer than six characters or four digits) is
not carried.

A list item whose value is a document number is labelled with whose it is ("- Anna:
548213307", "2. Ben Weber, 561190284"): that label is a name where the name lexicon knows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import regex as re

from tasks.pii.clauses import VETO, claimed_after, subject_word, vetoed
from tasks.pii.context import LIST_MARK, as_capitals
from tasks.pii.generic.identifiers import ID_RE
from tasks.pii.names import lexicon_support

if TYPE_CHECKING:
    from presidio_analyzer import RecognizerResult

DOCUMENTS = frozenset(["PASSPORT", "DRIVER_LICENSE", "MEDICAL_ID"])
_MIN_CHARS, _MIN_DIGITS = 6, 4
_FIRST_GROUP = re.compile(r"\p{L}+(?=[ -])")
# a list item's label before its value: a mark, one to three capitalised words, a separator
_OWNER = re.compile(
    rf"[ \t>]*(?:{LIST_MARK})?"
    r"(\p{Lu}[\p{L}'\u2019-]*(?:[ \t]+\p{Lu}[\p{L}'\u2019-]*){0,2})[ \t]*[:,\u2013\u2014-][ \t]*"
)


def shape(value: str) -> str:
    """``value`` with each capital as ``A``, each lower-case letter as ``a`` and each digit as
    ``9`` (separators kept): two numbers of one document share it."""
    return "".join(
        "9" if c.isdigit() else ("A" if c.isupper() else "a") if c.isalpha() else c for c in value
    )


def _specific(value: str) -> bool:
    digits = sum(c.isdigit() for c in value)
    return sum(c.isalnum() for c in value) >= _MIN_CHARS and digits >= _MIN_DIGITS


def _claimed(view: str, start: int, value: str) -> bool:
    """Another thing's word claims the code at ``start``: right before it in its sentence, as
    its first group or as the subject of the clause naming it."""
    head = _FIRST_GROUP.match(value)
    return bool(
        vetoed(VETO, view, start)
        or claimed_after(view, start + len(value))
        or (head and VETO.fullmatch(head.group(0)))
        or VETO.fullmatch(subject_word(view, start))
    )


def document_results(
    text: str, findings: Sequence[RecognizerResult], entities: Sequence[str]
) -> list[RecognizerResult]:
    """:func:`same_documents` as the engine's findings, of the configured ``entities`` only."""
    from presidio_analyzer import RecognizerResult

    return [
        RecognizerResult(entity, start, end, 0.6)
        for start, end, entity in same_documents(text, findings)
        if entity in entities
    ]


def same_documents(text: str, findings: Sequence[RecognizerResult]) -> list[tuple[int, int, str]]:
    """``(start, end, entity)`` of the codes in ``text`` shaped like a document number found
    there and not found themselves (see the module), and the names that label a list's
    document numbers (``PERSON``: "- Anna: 548213307")."""
    documents = _like_documents(text, findings)
    spans = [(r.start, r.end) for r in findings if r.entity_type in DOCUMENTS]
    return documents + _owners(text, spans + [(s, e) for s, e, _t in documents])


def _owners(text: str, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int, str]]:
    """The label of a list item whose value is a document number, where the name lexicon
    knows it as a name ("- Anna: 548213307", "2. Ben Weber, 561190284")."""
    out = []
    for start, _end in spans:
        line = text.rfind("\n", 0, start) + 1
        m = _OWNER.fullmatch(text, line, start)
        if m and lexicon_support(m.group(1)) > 0:
            out.append((m.start(1), m.end(1), "PERSON"))
    return out


def _like_documents(text: str, findings: Sequence[RecognizerResult]) -> list[tuple[int, int, str]]:
    view = as_capitals(text)
    shapes: dict[str, str] = {}
    for r in findings:
        value = view[r.start : r.end]
        if r.entity_type in DOCUMENTS and _specific(value):
            shapes.setdefault(shape(value), r.entity_type)
    if not shapes:
        return []
    taken = [(r.start, r.end) for r in findings]
    out = []
    for m in ID_RE.finditer(view):
        entity = shapes.get(shape(m.group(0)))
        if entity is None or any(s < m.end() and m.start() < e for s, e in taken):
            continue
        if not _claimed(view, m.start(), m.group(0)):
            out.append((m.start(), m.end(), entity))
    return out
