"""Where names and addresses sit in structured text, whatever a model says: mail headers
(``From: Sarah O'Neil <s@x.com>``), JSON and form fields (``"passenger_name": "..."``,
``Name: ...``, ``"address": "..."``), airline style (``SMITH/JOHN MR``) and romanised
Korean names (``HONG GILDONG``, ``Gil-dong Hong``, ``park jisoo``)."""

from __future__ import annotations

from typing import Any

import regex as re

from tasks.pii.generic.fields import name_value
from tasks.pii.generic.structured import conversation_turns, scan
from tasks.pii.lexicon import STOP_WORDS, alternatives, word_list
from tasks.pii.names import (
    AMBIGUOUS,
    KOREAN_SURNAMES,
    REPLIES,
    corroborated,
    lexicon,
    lexicon_support,
    product_modifier,
)
from tasks.pii.names.cues import NOT_A_NAME

_NAME = r"\p{Lu}[\p{L}'’.-]*(?:\s+\p{Lu}[\p{L}'’.-]*){0,3}"
_HEADER = re.compile(
    rf"(?m)^[>\s]*(?i:from|to|cc|bcc|reply-to|sender|de|von)\s*:\s*[\"']?"
    rf"((?:\p{{Lu}}[\p{{L}}'’-]*,\s+)?{_NAME})[\"']?\s*(?:<|\[mailto|\(|$)"
)
_BEFORE_MAIL = re.compile(rf"[\"']?({_NAME})[\"']?\s*(?:<|\(|\[mailto:)[\w.+-]+@")
_WROTE = re.compile(
    rf"(?:,|\bat\s\d{{1,2}}:\d\d(?:\s?[AP]M)?,?)\s+({_NAME})\s+(?:<[^>]+>\s+)?wrote:"
)
# person keys of JSON objects and forms; a bare "name" needs a lexicon name in the value
_PERSON_KEY = (
    r"full[\s_-]?name|first[\s_-]?name|last[\s_-]?name|given[\s_-]?names?|family[\s_-]?name|"
    r"surname|customer(?:[\s_-]?name)?|passenger(?:[\s_-]?name)?|pax(?:[\s_-]?name)?|"
    r"card[\s_-]?holder(?:[\s_-]?name)?|account[\s_-]?holder(?:[\s_-]?name)?|holder[\s_-]?name|"
    r"name[\s_-]?on[\s_-]?card|contact(?:[\s_-]?name)?|recipient(?:[\s_-]?name)?|"
    r"sender(?:[\s_-]?name)?|patient(?:[\s_-]?name)?|employee(?:[\s_-]?name)?|"
    r"guest(?:[\s_-]?name)?|travell?er(?:[\s_-]?name)?|beneficiary(?:[\s_-]?name)?|"
    r"emergency[\s_-]?contact|insured(?:[\s_-]?name)?|policy[\s_-]?holder|"
    r"applicant(?:[\s_-]?name)?|signed[\s_-]?by|requested[\s_-]?by|assignee|owner[\s_-]?name|"
    r"ship[\s_-]?to[\s_-]?name|bill[\s_-]?to[\s_-]?name|holder|owner|name[\s_-]?on[\s_-]?account|"
    r"name"
)
_KEYED = re.compile(
    rf"(?m)(?:^|[\s{{,\"'])[\"']?(?P<key>(?i:{_PERSON_KEY}))[\"']?\s*[:=]\s*[\"']?"
    r"(?P<value>\p{L}[\p{L}'’.-]*(?:,?[ ]+\p{L}[\p{L}'’.-]*){0,4})(?=[\"']?\s*(?:[,}\n;|]|$))"
)
# an address field's key, its kind first or not ("shipping_address", "address line 2")
_ADDRESS_WORDS = (
    r"(?:(?:"
    + alternatives("name_spans_address_kinds")
    + r")[\s_-]?)?(?:address(?:[\s_-]?line[\s_-]?\d)?|addr|street)"
)
# a quoted JSON value ("address": "Sveavägen 44, 111 34 Stockholm") or a form line
_ADDRESS_KEY = re.compile(
    rf"(?i)[\"'](?:{_ADDRESS_WORDS})[\"']\s*:\s*\"(?P<value>[^\"\n]*\d[^\"\n]*)\""
    rf"|(?im)^[ \t]*(?:{_ADDRESS_WORDS})[ \t]*[:=][ \t]*(?P<line>[^\n]*\d[^\n]*?)[ \t]*$"
)
_AIRLINE = re.compile(
    r"(?<![\p{L}/])(\p{Lu}[\p{Lu}'-]+(?:\s\p{Lu}[\p{Lu}'-]+)?/\p{Lu}[\p{Lu}'-]+(?:\s\p{Lu}[\p{Lu}'-]+)?)"
    r"(?:\s?(" + alternatives("name_spans_airline_titles") + r"))?(?![\w/])"
)
_PAIR = re.compile(
    r"(?<![\p{L}'-])(\p{Lu}\p{Ll}+|\p{Lu}+)\s(\p{Lu}[\p{Ll}'’]+|\p{Lu}+)(?![\p{L}'-])"
)
_NOT_AIRLINE = frozenset(set(word_list("name_spans_not_airline")))
# a name alone on the line after a sign-off ("Kind regards\n\nFiona MacLeod")
_SIGNED = re.compile(
    r"(?im)^[ \t]*(?:best|kind regards|regards|best regards|warm regards|cheers|thanks|"
    r"thank you|sincerely|many thanks|all the best|yours(?: truly| sincerely)?)[,!.]?[ \t]*\n+[ \t]*"
    r"(?-i:(\p{Lu}[\p{L}'’.-]+(?:[ \t]\p{Lu}[\p{L}'’.-]+){0,3}))[ \t]*$"
)
# a relation, role or speech verb then a capitalised name ("my daughter Emily")
_RELATION = re.compile(
    r"(?i:\b(?:" + alternatives("name_spans_relations") + r")\s+)"
    r"(\p{Lu}[\p{Ll}'’-]+(?:\s\p{Lu}[\p{Ll}'’-]+){0,2})"
)
# weaker cues: a name after or before them only when the lexicon knows it
_NAME_WORDS = r"\p{Lu}[\p{Ll}'’-]+(?:\s\p{Lu}[\p{Ll}'’-]+){0,2}"
_WEAK_BEFORE = alternatives("name_spans_weak_cues")
_WEAK_AFTER = alternatives("name_spans_weak_verbs")
_WEAK_CUE = re.compile(
    rf"(?i:\b(?:{_WEAK_BEFORE})\s*[:,]?\s+)(?P<name>{_NAME_WORDS})"
    rf"|(?:^|(?<=[\n,.!?]\s*))(?P<name>{_NAME_WORDS})(?=\s+(?i:{_WEAK_AFTER}|-\s|\+\d))"
)
# a romanised Korean syllable: an optional initial consonant, a vowel, an optional final
_SYLLABLE = (
    f"(?:{alternatives('name_spans_initials')})?"
    f"(?:{alternatives('name_spans_vowels')})(?:{alternatives('korean_romanised_finals')})?"
)
_GIVEN = re.compile(rf"(?i)^(?:{_SYLLABLE})(?:-?(?:{_SYLLABLE}))$")
_TWO_WORDS = re.compile(
    r"(?<![\p{L}'-])(\p{L}+(?:-\p{L}+)?)(?:\s+|,\s*)(\p{L}+(?:-\p{L}+)?)(?![\p{L}'-])"
)
_LOWER_SURNAMES = frozenset(word_list("name_spans_lower_surnames"))


def structured_name_spans(text: str, _nlp: object = None) -> list[tuple[int, int]]:
    """Names in mail headers, before an e-mail address, in person fields of JSON and forms,
    in airline style, and romanised Korean names."""
    spans = []
    for regex in (_HEADER, _BEFORE_MAIL, _WROTE):
        spans += [(m.start(1), m.end(1)) for m in regex.finditer(text)]
    spans += _keyed_names(text)
    for m in _AIRLINE.finditer(text):
        if m.group(1) not in _NOT_AIRLINE and len(m.group(1)) >= 6:
            spans.append((m.start(), m.end()))
    spans += [(m.start(1), m.end(1)) for m in _SIGNED.finditer(text)]
    for m in _RELATION.finditer(text):
        if m.group(1).split()[0].lower() not in NOT_A_NAME:  # "ask for Premium support"
            spans.append((m.start(1), m.end(1)))
    doc = getattr(_nlp, "tokens", None)
    for m in _WEAK_CUE.finditer(text):
        if m.group("name").split()[0].lower() in STOP_WORDS:
            continue  # a question's word: "Sorry! What is the member ID?"
        if corroborated(text, *m.span("name")) and not _company_speaking(doc, *m.span("name")):
            spans.append((m.start("name"), m.end("name")))
    spans += romanised_korean_spans(text)
    spans += [
        m.span()
        for m in _PAIR.finditer(text, overlapped=True)
        if _known_pair(text, m) and not product_modifier(doc, *m.span())
    ]
    return spans


def _keyed_names(text: str) -> list[tuple[int, int]]:
    """The values of a form's person keys ("Passenger: Ana Lima") outside JSON and tables that
    are shaped as a name (:func:`tasks.pii.generic.fields.name_value`; "Customer: charged twice
    for one month" is a message) or that the name lexicon knows as one; in a conversation's
    turn ("Customer: checking", "Customer: hang on": an answer) judged as a weak role's."""
    tables = [(r.start, r.end) for r in scan(text).regions]
    turns = conversation_turns(text)
    spans = []

    def in_turn(at: int) -> bool:
        return any(s <= at < e for s, e in turns)

    for m in _KEYED.finditer(text):
        key, value = m.group("key").lower(), m.group("value")
        if any(s <= m.start("value") < e for s, e in tables):
            continue  # JSON and tables: tasks.pii.generic.structured reads their fields
        known = lexicon_support(value) >= 2
        if key == "name" and not known and not korean_name(value):
            continue
        if not known and not name_value(value, strong=not in_turn(m.start("value"))):
            continue  # "Customer: charged twice for one month": a message, no name
        if not any(w.lower() in STOP_WORDS or w.lower() in REPLIES for w in value.split()[:1]):
            spans.append((m.start("value"), m.end("value")))
    return spans


_COMPANY_ENTS = frozenset(["ORG", "GPE", "FAC", "PRODUCT", "NORP"])


def _company_speaking(doc: Any, start: int, end: int) -> bool:
    """One word the lexicon does not know as a given name, that the model calls a company or
    place: "Jumia said", "Asda says" (a shop or a city speaks through its staff)."""
    span = doc.char_span(start, end, alignment_mode="expand") if doc is not None else None
    return bool(
        span is not None
        and len(span) == 1
        and lexicon_support(span.text) < 2
        and span[0].ent_type_ in _COMPANY_ENTS
    )


def _known_pair(text: str, m: re.Match[str]) -> bool:
    """A known given name then a known surname ("Aleksandr Volkov"), whatever the model says."""
    firsts, lasts = lexicon()
    first, last = m.group(1).lower(), m.group(2).lower()
    return (
        first in firsts
        and first not in AMBIGUOUS
        and last in lasts
        and last not in AMBIGUOUS
        and corroborated(text, m.start(), m.end())
    )


def address_field_spans(text: str, _nlp: object = None) -> list[tuple[int, int]]:
    """Values of address fields in JSON and forms (with a house or unit number)."""
    spans = []
    for m in _ADDRESS_KEY.finditer(text):
        group = "value" if m.group("value") is not None else "line"
        spans.append((m.start(group), m.end(group)))
    return spans


def korean_name(value: str) -> bool:
    """Whether ``value`` is a romanised Korean name (surname first or last)."""
    words = value.replace(",", " ").split()
    if len(words) != 2:
        return False
    return _pair(words[0], words[1]) or _pair(words[1], words[0])


def _pair(surname: str, given: str) -> bool:
    return (
        surname.lower() in KOREAN_SURNAMES
        and bool(_GIVEN.match(given))
        and given.lower() not in STOP_WORDS
        and len(given) >= 3
    )


def romanised_korean_spans(text: str) -> list[tuple[int, int]]:
    """``HONG GILDONG``, ``Gil-dong Hong``, ``Kim Minjun``, ``park jisoo``: a known surname
    and a two-syllable romanised given name, in title case, upper case or (surnames that are
    rarely English words) lower case."""
    spans = []
    for m in _TWO_WORDS.finditer(text, overlapped=True):
        a, b = m.group(1), m.group(2)
        cased = _case_ok(a, b)
        if not cased or not korean_name(f"{a} {b}"):
            continue
        if cased == "lower" and not ({a, b} & _LOWER_SURNAMES and "-" not in a):
            continue
        spans.append((m.start(1), m.end(2)))
    return spans


def _case_ok(a: str, b: str) -> str:
    if all(w.isupper() for w in (a, b)):
        return "upper"
    if all(w[0].isupper() and w[1:].replace("-", "").islower() for w in (a, b)):
        return "title"
    if all(w.islower() for w in (a, b)):
        return "lower"
    return ""
