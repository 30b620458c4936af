"""Identifiers that have a shape but no checksum, found by the words people put before them.

A passport, a driver's licence, a medical record or insurance member id, a bank account, a
date of birth: each is "some digits and letters" on its own, so a bare shape would also take
order, tracking and model numbers. A :class:`ContextRule` takes a value only when a cue word
("passport", "DOB", "member id", "acct") comes at most ``window`` characters before it and
the words in between are fillers ("number is", "no.", ``": "``) - never an order, tracking or
booking word. Cues never rely on ``\\b``: ``passport_no`` in JSON and ``여권번호는`` glued to
a particle are cues too. Shapes that identify on their own (SSN with separators, IPv4/IPv6,
a Luhn-valid card) are in :mod:`tasks.pii.generic.contact`; this module adds the context-only
forms (a card that fails Luhn after "card number", an SSN without separators after "SSN").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import regex as re

from tasks.pii.clauses import COPULA, VETO
from tasks.pii.context import ContextRule
from tasks.pii.lexicon import alternatives, words_pattern

# an id token: digits and letters in groups joined by single spaces or hyphens, where each
# later group holds a digit or is one to three capitals before one that does ("S123-456-78-901-0",
# "NY 123 456 789", "M12345678", "1EG4-TE5-MK73", a French passport typed "12 AB 34567")
_ID_HEAD = r"(?:[A-Z]{1,3}[ -]?)?[A-Za-z0-9]*\d[A-Za-z0-9]*"  # its first group
_ID = rf"(?<![\w-]){_ID_HEAD}(?:[ -](?:[A-Z]{{1,3}}[ -])?[A-Za-z]*\d[A-Za-z0-9]*)*(?![\w-])"
_DIGIT_GROUPS = r"(?<![\w-])\d(?:[ -]?\d){5,33}(?![\w-])"
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DATE = (
    r"(?i)(?<![\w])(?:\d{1,2}\s?[/.-]\s?\d{1,2}\s?[/.-]\s?(?:\d{4}|\d{2})"
    r"|\d{4}\s?[/.-]\s?\d{1,2}\s?[/.-]\s?\d{1,2}"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?(?:\s+of)?[\s-]+{_MONTH},?[\s-]+\d{{2,4}}"
    rf"|{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}"
    r"|\d{4}\s?년\s?\d{1,2}\s?월\s?\d{1,2}\s?일|(?:19|20)\d{6}|\d{6}"
    rf"|\d{{1,2}}(?:{alternatives('month_abbreviations')})\d{{2,4}}"
    r"|(?:19|20)\d{2})(?![\w])"
)


def _cue(words: str) -> re.Pattern[str]:
    """Cue words, case-insensitive, bounded by non-letters (not ``\\b``: ``passport_no``)."""
    return re.compile(rf"(?i)(?<![a-z])(?:{words})(?![a-z])")


def _rule(
    entity: str,
    cue: re.Pattern[str],
    value: re.Pattern[str],
    valid: Callable[[str], bool],
    *,
    window: int = 32,
    fillers: int = 1,
    **more: Any,
) -> ContextRule:
    """A cue-first :class:`~tasks.pii.context.ContextRule`."""
    return ContextRule(
        entity=entity, cue=cue, value=value, valid=valid, window=window, fillers=fillers, **more
    )


def _counts(value: str) -> tuple[int, int]:
    return sum(c.isdigit() for c in value), sum(c.isalpha() for c in value)


def _id_of(min_digits: int, min_len: int, max_len: int) -> Callable[[str], bool]:
    def ok(value: str) -> bool:
        digits, letters = _counts(value)
        return digits >= min_digits and min_len <= digits + letters <= max_len

    return ok


def _digits_between(low: int, high: int) -> Callable[[str], bool]:
    return lambda value: low <= _counts(value)[0] <= high


def _icao_number(value: str) -> bool:
    """A passport's document number as ICAO 9303 writes it: nine capitals and digits, at least
    one of each (the Dutch and German ones carry as few as one or two digits)."""
    return len(value) == 9 and value.isalnum() and value.isupper() and _counts(value)[0] >= 1


def _icao_typed(value: str) -> bool:
    """ICAO's nine as a traveller types it on a phone, in lower case ("pp no c4j9rt1km"):
    only right after the document's own word, fillers alone between."""
    return value.isascii() and not value.isupper() and _icao_number(value.upper())


def _any(_value: str) -> bool:
    return True


DATE_RE = re.compile(_DATE)
_YEAR_MONTH = re.compile(r"(?:19|20)\d\d-(?:0[1-9]|1[0-2])(?:-(?:0[1-9]|[12]\d|3[01]))?")
# what a passport is renewed for
_TRIP = alternatives("identifiers_trip_words")
# "licence" before a software's or a contract's noun: "license key", "licence fee"
_NOT_DRIVING = rf"(?![\s_-]+(?:{words_pattern('identifiers_licence_compounds')})(?![a-z]))"
ID_RE = re.compile(_ID)
_GROUPS_RE = re.compile(_DIGIT_GROUPS)

_COPULA = re.compile(rf"(?i){COPULA}\s*$")  # a clause naming the value ends here


def _passport_number(value: str) -> bool:
    """Letters and at least four digits, eight to ten digits alone, or ICAO's nine."""
    return (
        _id_of(4, 6, 12)(value)
        and any(c.isalpha() for c in value)
        or _id_of(8, 8, 10)(value)
        and value.isdigit()
        or _icao_number(value)
    )


# the number first, then a clause that says whose document it is ("... is the number" in a
# text about a passport: "Subject: Passport ... 548213307 is the number"): "C4J9RT1KM is my passport
# number", "18CV45872 - that's the passport", "533412987 (my US passport)", "LK0098231, it's on
# my passport's photo page"; one word may qualify the document ("US", "old", "son's")
_PASSPORT_WORDS = words_pattern("passport_words")  # in lexicon/passport_words.txt's languages
_RESTATING = alternatives("identifiers_restating_words")  # "is", "that's", "it is", "on"
_WHOSE = alternatives("identifiers_whose_words")  # "my", "the", "their"
_NAMED_AFTER = re.compile(
    rf"(?<![\w-])(?P<v>{_ID_HEAD})(?![\w-])"
    r"(?=[ \t]*(?:[,(:=\u2013\u2014-][ \t]*)?"
    rf"(?i:(?:(?:{_RESTATING})\s+){{0,3}}"
    rf"(?:(?:{_WHOSE}|your|a)\s+)?(?:[\p{{L}}.\u2019']+\s+)?"
    rf"(?:{_PASSPORT_WORDS})(?![a-z])"
    # in a text about a passport (the rule's topic), "... is the number" ending a clause too
    rf"|(?:is|was|that[\u2019']?s|it[\u2019']?s)\s+(?:{_WHOSE})\s+(?:number|no\b)[ \t]*(?:[,.;:!?)\n]|$)))"
)

_PASSPORT_WORD = _cue(_PASSPORT_WORDS)

# a passport's number as a value: an id token, or nine digits in groups of three joined by dots
# as numbers are grouped in much of Europe and Latin America ("passport no. 548.213.307")
_PASSPORT_VALUE = re.compile(rf"(?<![\w.-])\d{{1,3}}(?:\.\d{{3}}){{2}}(?![\w]|[.-]\w)|{_ID}")


def _id_or_icao(value: str) -> bool:
    """An identity document's number: digits and letters with four digits or more, or ICAO's
    nine with as few as one digit ("pp no C4J9RT1KM")."""
    return _id_of(4, 6, 12)(value) or _icao_number(value)


def _document_number(value: str) -> bool:
    """A passport's number after its word (:func:`_id_or_icao`); of digits alone, six to ten
    (no country's passport has more; a helpline "0300 222 0000" after "passport office"
    does)."""
    digits, letters = _counts(value)
    if not letters:
        return 6 <= digits <= 10
    return _id_or_icao(value)


_RULES: tuple[ContextRule, ...] = (
    _rule(
        "PASSPORT",
        # the word in its users' and travellers' languages, and its abbreviations
        _cue(rf"{_PASSPORT_WORDS}|travel[\s_-]+doc(?:ument)?"),
        _PASSPORT_VALUE,
        _document_number,
        window=40,
        fillers=2,
    ),
    # a national identity card: an ICAO travel document too, its number as long as a
    # country makes it (India's twelve digits)
    _rule(
        "PASSPORT",
        _cue(r"(?:national[\s_-]+)?id(?:entity)?[\s_-]+card|personalausweis|carte\s+d'identit[ée]"),
        ID_RE,
        _id_or_icao,
        window=40,
        fillers=2,
    ),
    # in a text about a passport: "my old number was C01X00T47", "new one K7745216", "mine is"
    _rule(
        "PASSPORT",
        _cue(
            rf"(?:{alternatives('identifiers_number_qualifiers')})\s+(?:number|no|one)|"
            # "..., number 548213307" (a word before it says whose: "booking number"), "The
            # replacement is ...", "replacement C01X00T47"
            r"(?<!\p{L}\s)(?:number|no(?=[\s.:#]))|replacement(?:\s+(?:one|passport))?|"
            r"mine\s+is|mine:|it'?s|here(?:\s+it\s+is)?\s*:|"
            rf"(?:{alternatives('identifiers_document_words')})[\s_-]*(?:no|number|#|num|nr)\.?|"
            # another traveller's: "my son's is ..."
            rf"(?:{alternatives('identifiers_possessives')})\s+[a-z]+'s(?=\s+is)"
        ),
        ID_RE,
        _passport_number,
        window=20,
        fillers=1,
        # a passport, or a renewal in a text about a booking or a flight: what is renewed
        # for a trip is the passport ("I renewed it, the old number was ...")
        topic=_cue(
            rf"passports?|여권|renew(?:ed|al)[\s\S]{{0,200}}(?:{_TRIP})|(?:{_TRIP})[\s\S]{{0,200}}renew(?:ed|al)"
        ),
    ),
    _rule(
        "DRIVER_LICENSE",
        _cue(
            rf"driver'?s?'?[\s_-]*licen[cs]es?|licen[cs]e{_NOT_DRIVING}|driving[\s_-]+licen[cs]es?|drivers?[\s_-]*lic\.?|"
            r"licen[cs]e[\s_-]*(?:no|number|#|num)|dl[\s_-]?#?|d/l|dln|운전면허(?:증|번호)?"
        ),
        ID_RE,
        _id_of(3, 5, 20),
        window=40,
        fillers=2,
    ),
    # the document word, then a clause about whose or which one it is, then the number after
    # "is", "was", "be", ":" or "->" in the same sentence ("the licence on file for my husband
    # is C4418203", "the passport I registered with was EB8812094")
    _rule(
        "DRIVER_LICENSE",
        _cue(
            rf"driver'?s?'?[\s_-]*licen[cs]es?|driving[\s_-]+licen[cs]es?|licen[cs]es?{_NOT_DRIVING}"
        ),
        ID_RE,
        lambda value: _id_of(4, 6, 16)(value) and not value.isalpha(),
        window=90,
        fillers=12,
        ends=_COPULA,
    ),
    _rule(
        "PASSPORT",
        _cue(r"passports?"),
        ID_RE,
        _passport_number,
        window=90,
        fillers=12,
        ends=_COPULA,
    ),
    _rule("PASSPORT", _PASSPORT_WORD, ID_RE, _icao_typed, window=16, fillers=0),
    # the word's short forms, which are also pages ("pp 112-118") and slides ("PPT:"): right
    # before a passport's shape, fillers alone between ("PPT: K7745216", "p/p no. AB1234567"),
    # and "Pass." as a form abbreviates it before its number's word ("Pass. No. 548213307")
    _rule(
        "PASSPORT",
        _cue(r"ppt|pp|p/p|psp|pass\.(?=\s*(?:no|nr|num|#))"),
        ID_RE,
        _passport_number,
        window=12,
        fillers=0,
    ),
    ContextRule(
        entity="PASSPORT",
        value=_NAMED_AFTER,
        valid=_passport_number,
        veto=VETO,  # "order 12345678 is on my passport form"
        topic=_PASSPORT_WORD,
    ),
    _rule(
        "MEDICAL_ID",
        _cue(alternatives("identifiers_medical_cues")),
        ID_RE,
        _id_of(3, 5, 20),
        window=40,
        fillers=2,
    ),
    _rule(
        "DATE_OF_BIRTH",
        _cue(alternatives("birth_words")),
        DATE_RE,
        _any,
        window=30,
        fillers=2,
    ),
    _rule(
        "BANK_ACCOUNT",
        _cue(alternatives("identifiers_bank_account_cues")),
        _GROUPS_RE,
        # a statement's month is no account ("account statement period 2025-10")
        lambda value: _digits_between(6, 34)(value) and not _YEAR_MONTH.fullmatch(value),
        window=30,
        fillers=2,
    ),
    _rule(
        "US_SSN",
        _cue(
            r"ssn|social[\s_-]+security(?:[\s_-]+(?:no|number|#))?|social|soc\.?[\s_-]*sec|ss[\s_-]?#|sin|itin"
        ),
        re.compile(r"(?<![\w-])\d{3}[ .-]?\d{2}[ .-]?\d{4}(?![\w-])"),
        _any,
        window=30,
    ),
    _rule(
        "CREDIT_CARD",
        _cue(alternatives("identifiers_card_cues")),
        re.compile(r"(?<![\w-])\d(?:[ .-]?\d){12,18}(?![\w-])"),
        _any,
        window=30,
        fillers=2,
    ),
    _rule(
        "UK_NINO",
        _cue(r"national[\s_-]+insurance(?:[\s_-]+(?:no|number))?|nino|ni[\s_-]*(?:no|number|#)"),
        re.compile(
            r"(?<![\w-])[A-Za-z]{2}[\s_-]?\d{2}[\s_-]?\d{2}[\s_-]?\d{2}[\s_-]?[A-Da-d]?(?![\w-])"
        ),
        _any,
        window=30,
    ),
    _rule(
        "PHONE_NUMBER",
        _cue(alternatives("identifiers_phone_cues")),
        re.compile(
            r"(?<![\w+])[+(]?\d[\d ().-]{5,18}\d(?:[\s_-]?(?:x|ext\.?)[\s_-]?\d{1,5})?(?![\w])"
        ),
        _digits_between(7, 15),
        window=30,
        fillers=2,
    ),
)


# a list of values after one cue ends where another rule's cue stands
_ANY_CUE = re.compile("|".join(f"(?:{r.cue.pattern})" for r in _RULES if r.cue is not None))
RULES: tuple[ContextRule, ...] = tuple(replace(r, stop=_ANY_CUE) for r in _RULES)


def context_spans(rule: ContextRule) -> Callable[[str, object], list[tuple[int, int]]]:
    """The span function of a recogniser for ``rule``."""
    return lambda text, _nlp: list(rule.spans(text))


# a full date (day, month and year) right after a person's name: "Lim Jaebeom 1994.01.06",
# "Signed: Harold Whitcombe, 14 Nov 1951" - a record of someone, not an appointment
_DATE_AFTER_NAME = re.compile(
    r"(?i)[ \t]*[,(/|:-]?[ \t]*(?:b\.|born|dob)?[ \t]*"
    r"(\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}|\d{4}[/.-]\d{1,2}[/.-]\d{1,2}"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH},?\s+\d{{4}}|{_MONTH}\s+\d{{1,2}},?\s+\d{{4}})(?![\w])"
)


def date_after_name(text: str, end: int) -> tuple[int, int] | None:
    """The span of a full date written right after a name ending at ``end``, if any."""
    m = _DATE_AFTER_NAME.match(text, end)
    return m.span(1) if m else None
