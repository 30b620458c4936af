"""The precision stage every finding passes after the recognisers (brands, titles and codes are
judged where they are found; this is what no recogniser can see alone).

A PERSON finding made only of the words that sign or open a message where a name would
(``Thanks,\\nAccounts Payable``, ``From: Billing``, ``Marketing here``, ``Good afternoon``:
:file:`lexicon/filters_not_names.txt`) names a team or greets, never a person.

A PERSON finding with an organisation's acronym in it, a word of two to five capitals without
a vowel ("Carrier DHL", "HSBC Fraud Team", "Regards, KPMG", "Contact: BBC Studios"), names a
company, a carrier or an agency where a name would stand: no one's name is written without a
vowel, unless the name lexicon knows the word as one, it is one of the few surnames written
so ("Tom NG"), a title ("SMITH/JOHN MR") or a nationality's code; a name finding inside it
("Carrier" of "Carrier DHL") goes with it.

A PERSON finding right after a maker's name, or starting with one, is a product's model
("my Renault Zoe", "Toyota Yaris Cross", "Mercedes Sprinter", "Asus Vivobook":
:file:`lexicon/product_makers.txt`), unless the maker's word is a given name the lexicon knows
before a surname ("Mercedes Garcia", "Austin Reed") or a field's key names a person there
("Driver: Kia Johnson").

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
from functools import lru_cache
from typing import TYPE_CHECKING

import regex as re

from tasks.pii.generic.fields import ROLES, field_type, key_type
from tasks.pii.generic.structured import scan
from tasks.pii.lexicon import word_list, words_pattern
from tasks.pii.names import lexicon

if TYPE_CHECKING:
    from presidio_analyzer import RecognizerResult

_NOT_NAMES = frozenset(word_list("filters_not_names"))
_WORD = re.compile(r"\p{L}[\p{L}'’]*")
_QUOTES = "'\"‘’“”`´"
_NAMED = frozenset(["PERSON", "LOCATION"])
# an acronym no one could say as a name: two to five capitals, no vowel (y counts as one);
# the surnames written so (Cantonese Ng, Czech Vlk and Srb) are none
_ACRONYM = re.compile(r"(?<![\p{L}\d])[B-DF-HJ-NP-TV-XZ]{2,5}(?![\p{L}\d])")
_VOWELLESS_NAMES = frozenset(["ng", "vlk", "srb"])
_MAKERS = words_pattern("product_makers")
_MAKER_BEFORE = re.compile(rf"(?<![\p{{L}}\d'’-])({_MAKERS})[ \t]+$")
_MAKER_FIRST = re.compile(rf"({_MAKERS})[ \t]+(?=\p{{L}})")
_ROLE_BEFORE = re.compile(r"(\p{L}+)[ \t]+$")  # the word right before a name
# a field's key right before a value ("Driver: ", ``"contact": "``)
_KEY_BEFORE = re.compile(r"([\p{L}_]+)[\"']?[ \t]*[:=][ \t]*[\"']?$")
_LABELS_VALUE = re.compile(r"[ \t]*(?:[:=#]|\d)")  # after a field's label: its value
_TITLES = frozenset(w.rstrip(".") for w in word_list("evaluation_titles"))
# what else is written so beside a name: a title ("SMITH/JOHN MR"), a nationality ("NLD")
_NOT_ACRONYMS = _TITLES | {w.lower() for w in word_list("travel_nationality_codes")}
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
    # an organisation's name with its acronym, a product's maker and model, and the name
    # findings inside them ("Carrier" of "Carrier DHL", "Renault" of "Renault Zoe")
    people = [r for r in found if r.entity_type == "PERSON"]
    companies = [(r.start, r.end) for r in people if holds_acronym(text, r.start, r.end)]
    companies += [span for r in people if (span := model_name(text, r.start, r.end))]
    kept = []
    for r in found:
        if r.entity_type in _NAMED:
            while r.end > r.start and text[r.end - 1] in _QUOTES:
                r.end -= 1
            while r.start < r.end and text[r.start] in _QUOTES:
                r.start += 1
        person = r.entity_type == "PERSON"
        if r.end > r.start and not (
            person
            and (
                not_a_name(text[r.start : r.end])
                or _spelling_aid(text, r.start, r.end)
                or any(s <= r.start and r.end <= e for s, e in companies)
            )
        ):
            r.end = spelled_until(text, r.end)
            kept.append(r)
    return kept


def holds_acronym(text: str, start: int, end: int) -> bool:
    """Whether the name finding ``text[start:end]`` holds an organisation's acronym (see the
    module); a field's label with its value after it is none ("MRN: 00482913", "DOB 01/02")."""
    firsts, lasts = lexicon()
    for m in _ACRONYM.finditer(text, start, end):
        word = m.group().lower()
        known = word in _VOWELLESS_NAMES or word in _NOT_ACRONYMS or word in firsts or word in lasts
        if not known and not _LABELS_VALUE.match(text, m.end()):
            return True
    return False


def model_name(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Where the maker's name and its model are when the name finding ``text[start:end]`` is
    a product's model after its maker (see the module); ``None`` where it is not."""
    line = text.rfind("\n", 0, start) + 1
    before = _MAKER_BEFORE.search(text, line, start)
    if before is not None:
        maker, model, begin = before.group(1), text[start:end], before.start()
    elif first := _MAKER_FIRST.match(text, start, end):
        maker, model, begin = first.group(1), text[first.end() : end], start
    else:
        return None
    firsts, lasts = lexicon()
    words = _WORD.findall(model)
    if words and (
        maker.lower() in firsts
        and words[0].lower() in lasts
        or words[0].lower().rstrip(".") in _TITLES
    ):
        return None  # "Mercedes Garcia", "Seat Mrs Lopez by the window"
    key = _KEY_BEFORE.search(text, line, begin)
    if key and key_type(key.group(1)) == "PERSON":
        return None  # "Driver: Kia Johnson"
    role = _ROLE_BEFORE.search(text, line, begin)
    if role and role.group(1).lower() in ROLES:
        return None  # "the customer Morgan O'Hurley"
    if _person_column(text, start):
        return None  # "order_id,name,...\n136059,Mercedes Vallés,..."
    return begin, end


def _person_column(text: str, at: int) -> bool:
    """Whether ``at`` is in a record's field that is a person's by its key, its parent and
    the keys beside it: a table's cell ("name" beside "email" and "dob"), a JSON value
    (``{"ship_to": {"name": ...}}``), a markup element or a ``key=value`` pair."""
    return any(start <= at < end for start, end in _person_cells(text))


@lru_cache(maxsize=8)
def _person_cells(text: str) -> tuple[tuple[int, int], ...]:
    """The spans of ``text``'s fields that are a person's, read once per text (a sheet of
    many "Mercedes ..." rows asks once per row)."""
    return tuple((f.start, f.end) for f in scan(text).fields if field_type(f) == "PERSON")


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
