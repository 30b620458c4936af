"""Passport numbers written without the word "passport": the number a traveller gives for a
booking, a check-in, a visa form or an APIS record, with its nationality, expiry or issuing
country beside it ("nationality NGA, doc A05512873, expiry 2032-01-14", "travel ID
K8120457, issued by Vietnam"), and the number of an airline's passenger record
(``DOCS: P/NOR/31874592/NOR/...``) with the date of birth after it, and a traveller's row with
no label at all ("Kim Minji, M12345678, KOR, 1990-01-01": a nationality code and a birth date
beside the number) with that date of birth.

A passport number's usual shape - one or two capital letters then six to eight digits - is
also a knowledge-base article ("KB5034441") or a product code, so the shape counts only with
a travel document's facts within the same line (:data:`_FACTS`; an expiry date, or an
identity check in the text ("KYC", "identity verification"), only beside a document word:
updates and warranties expire too, and a KYC ticket has a number of its own) and no order,
tracking or product word right before it (:data:`tasks.pii.clauses.VETO`).
"""

from __future__ import annotations

from bisect import bisect_left
from datetime import date
from functools import lru_cache
from typing import NamedTuple

import regex as re

from tasks.pii.clauses import SENTENCE_END, claimed_in
from tasks.pii.context import as_capitals
from tasks.pii.lexicon import STOP_WORDS, alternatives, word_list, words_pattern
from tasks.pii.names import NAME_PARTICLES, given_first

Span = tuple[int, int]

# one to three capitals, six to eight digits, one optional check letter or digit ("C8817265",
# "EY3390215", "L898902C3", Spain's "PAA123456"); France's two digits, two capitals, five
# digits ("18CV45872"); ICAO's nine capitals and digits, at least two of each (Germany's
# "C01X00T47", the Netherlands' "NW3K1P7R4"); an eight- or nine-digit number (Norway; the US,
# the UK) only right after a document word or in a traveller's row
_SHAPE = re.compile(
    r"(?<![\w-])(?:[A-Z]{1,3}\d{6,8}[A-Z0-9]?|\d{2}[A-Z]{2}\d{5}|\d{8,9}"
    r"|(?=(?:[A-Z]*\d){2})(?=(?:\d*[A-Z]){2})[A-Z0-9]{9})(?![\w-])"
)
# what is written beside a travel document's number and beside nothing else
_FACT_WORDS = alternatives("travel_facts")  # "nationality", "issued by", "visa", "check-in"
_FACTS = re.compile(rf"(?i)(?<![a-z])(?:{_FACT_WORDS})(?![a-z])")
# a data page's or a passenger record's own labels: ICAO's document type P ("Type: P",
# ``"doc_type": "P"``) and the issuing state's three-letter code ("code FRA")
# ("doc P" in an APIS line); a type P says a number of digits alone is the passport's too
_TYPE_WORD = r"(?i:doc(?:ument)?(?:[\s_-]*type)?|type)"
_TYPE_P = re.compile(rf"(?<![A-Za-z]){_TYPE_WORD}[\"']?[ \t]*[:=|,]?[ \t]*[\"']?P(?![\w-])")
_DATA_PAGE = re.compile(
    rf"{_TYPE_P.pattern}"
    r"|(?<![A-Za-z])(?i:(?:(?:issuing[ \t]+)?(?:state|country)[ \t]+)?code)[ \t]*[:=]?[ \t]*"
    r"[A-Z]{3}(?![\w-])"
)
# a sheet's column named for the document's type ("type", "doc_type", "Document Type")
_TYPE_ANYWHERE = re.compile(rf"(?<![A-Za-z]){_TYPE_WORD}(?![A-Za-z])")
_TYPE_COLUMN = re.compile(rf"[\"']?{_TYPE_WORD}[\"']?")
_CELL_SEP = re.compile(r"[\t|;,]")
_DOC_COLUMN = re.compile(r"(?i)[\"']?(?:travel[\s_-]*)?doc(?:ument)?[\"']?")
# a number's word with no other noun before it: "num 548213307", "Number: 548213307"
_NUMBER_WORD = r"(?:no|nr|num(?:ber)?|#)"  # a number's own word, after a label or alone
_OWN_NUMBER_WORD = re.compile(rf"(?im)(?:^|[^\w\s][ \t]*){_NUMBER_WORD}\.?[\s:=#]*$")
_NUMBER_COLUMN = re.compile(rf"(?i)[\"']?(?:doc(?:ument)?[\s_-]*)?(?:{_NUMBER_WORD}|id)[\"']?")
# an expiry date counts beside a document word only: updates and warranties expire too
_EXPIRY = re.compile(
    r"(?i)(?<![a-z])(?:expir[a-z]*|exp\.?|valid\s+(?:until|till|thru|through|to))(?![a-z])"
)
# an identity check (know-your-customer, anti-money-laundering) asks for the same document
_IDENTITY_CHECK = re.compile(
    r"(?i)(?<![a-z])(?:kyc|know\s+your\s+customer|aml|identity\s+(?:check|verification)|"
    r"id\s+verification|verify\s+(?:your|the|their)\s+identity|proof\s+of\s+identity)(?![a-z])"
)
# (or the traveller's: "traveller Jon Perez, K7745216, exp 2031")
_DOCUMENT = re.compile(
    r"(?i)(?<![a-z])(?:doc(?:ument)?s?|id|travel|travell?ers?|passengers?|pax)(?![a-z])"
)
# a document word right before the value: then a nine-digit number counts too
_DOC_WORD = re.compile(
    rf"(?i)(?<![a-z])(?:doc(?:ument)?|travel\s+id|id)(?:[\s_-]*{_NUMBER_WORD})?\.?"
    r"(?:\s+(?:is|was))?[\s:=#]*$"
)
# a traveller's nationality said of a person or of a document, not of a thing after it: "he's
# Irish,", "my Spanish one", "(Canadian)", "Amaka Obi, Nigerian, A05512873"
_DEMONYM = re.compile(
    # not a language ("translated into Spanish,", "she speaks Polish;")
    rf"(?im)(?<![a-z])(?<!(?<![a-z])(?:{alternatives('travel_language_before')})\s+)"
    rf"(?:{words_pattern('travel_demonyms')})"
    r"(?:[ \t]*(?:[,;:)|/]|$)|[ \t]+(?:one|citizen|national)(?![a-z]))"
)
# a later clause naming the value as the traveller's document: "... on the ticket? That's my
# document for the trip"
_DOCUMENT_AFTER = re.compile(
    r"(?i)[^\n]{0,40}?(?<![a-z])(?:that'?s|it'?s|this\s+is|is)\s+"
    rf"(?:{alternatives('clauses_determiners')})\s+(?:travel\s+)?(?:doc(?:ument)?|id)(?![a-z])"
)
_CLAUSE_END = re.compile(rf"{SENTENCE_END}|;\s")
# a renewal said of the value after it, in a text about a trip: what is renewed for a trip is
# the passport ("... to EK5530917, it was renewed"; not "the booking number on my passport
# renewal is ...")
_RENEWAL = re.compile(r"(?i)(?<![a-z])renew(?:ed|al)?(?![a-z])")
_TRIP = re.compile(rf"(?i)(?<![a-z])(?:{alternatives('identifiers_trip_words')})(?![a-z])")
_PARTICLE = "|".join(
    re.escape(p) for p in sorted(NAME_PARTICLES, key=len, reverse=True)
)  # "de Vries"
_ROW_NAME = re.compile(
    rf"(?<![\p{{L}}\d])\p{{Lu}}\p{{Ll}}[\p{{L}}'\u2019-]*(?:[ ]+(?:(?:{_PARTICLE})[ ]+)*"
    r"\p{Lu}\p{Ll}[\p{L}'\u2019-]*){1,2}(?![\p{L}\d])"
)
# the other numbers a traveller gives at check-in: loyalty, membership, vouchers
_NOT_DOCUMENT_WORDS = alternatives("travel_not_document")
_NOT_DOCUMENT = re.compile(rf"(?i)(?<![a-z])(?:{_NOT_DOCUMENT_WORDS})(?![a-z])")
# a traveller's row with no label at all ("Kim Minji, M12345678, KOR, 1990-01-01"): the
# holder's nationality as ICAO's three-letter code, a field of its own (not a date's month:
# "14 MAR 1985", :func:`_nationality`), and a date a traveller was born on (ten years ago or
# more)
_NATIONALITY = re.compile(
    r"(?<![A-Za-z0-9])(?:" + "|".join(word_list("travel_nationality_codes")) + r")(?![A-Za-z0-9])"
)
_MONTHS = alternatives("month_abbreviations")  # "14 MAR 1985", "3-jan-1990", "14 March 1985"
_DATE_BODY = (
    r"(?<![\w])(?:(?P<y>\d{4})[/.-]\d{1,2}[/.-]\d{1,2}"
    r"|\d{1,2}[/.-]\d{1,2}[/.-](?P<y>\d{4})"
    r"|\d{1,2}[ -]?"
    rf"(?:{_MONTHS})"
    r"[a-z]{0,6}\.?[ -]?"
    r"(?P<y>\d{4}))(?![\w])"
)
_YEAR_DATE = re.compile(rf"(?i){_DATE_BODY}")
# a labelled date of birth: a value beside it is a person's document ("DOB 12/03/1985"), not
# the label alone ("Date of birth field is optional on form F1020304")
_BIRTH_DATE = re.compile(
    rf"(?i)(?<![a-z])(?:{alternatives('birth_words')})(?![a-z])[\s:=,-]*(?:(?:is|was)\s+)?"
    + _DATE_BODY
)
# a row's fields: a sheet's separators, or a list's spaced slash or dash ("Jon Berg / 3187...")
_FIELD_SEP = re.compile(r"[ ]*[\t|;,][ ]*|[ ]+[/\u2013\u2014-][ ]+")
_NAME_FIELD = re.compile(
    r"[ ]*[\"']?(?P<name>\p{Lu}[\p{L}'\u2019.-]*(?:[ ]+\p{Lu}[\p{L}'\u2019.-]*){0,3})[\"']?[ ]*"
)
# the same in a row typed in lower case ("ana lima, fz1187342, bra, 1990-01-01"): its words
# not English ones
_LOWER_NAME_FIELD = re.compile(
    r"[ ]*[\"']?(?P<name>\p{Ll}[\p{Ll}'\u2019.-]*(?:[ ]+\p{Ll}[\p{Ll}'\u2019.-]*){0,3})[\"']?[ ]*"
)
_CODE = re.compile(r"\p{Lu}{1,3}")
_COMPACT_DATE = re.compile(r"(?:19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])")
_WINDOW = 60
_FORM_LINE = 60  # a line of a form or a data page holds one field
_RECORD_LINES = 3
_ROW_LINE = 400  # a sheet's row is no longer
_LABEL_SPAN = 12  # "Number: ", "num ", "# "
_HEADER_TRIES = 3  # the header lines above a row that may be its sheet's (as many cells)
# an airline's passenger record (APIS, the SSR DOCS element): document type P, issuing state,
# number, nationality ("DOCS: P/NOR/31874592/NOR/12MAR88/F/03JUN31"); or the number right
# after the record's capital DOCS ("| DOCS PAB482913")
_APIS = re.compile(
    r"(?<![A-Za-z0-9])P/[A-Z]{3}/(?P<value>[A-Z0-9]{5,15})/[A-Z]{3}(?![A-Za-z0-9])"
    # the traveller's date of birth and sex follow ("/12MAR88/F/")
    r"(?:/(?P<birth>\d{2}[A-Z]{3}\d{2,4})(?=/[MFXU](?![A-Za-z0-9])))?"
    r"|(?<![A-Za-z])DOCS[ \t]*:?[ \t]*(?P<value>[A-Z]{0,3}\d{6,9}[A-Z0-9]?)(?![A-Za-z0-9/])"
)


def travel_document_spans(text: str, _nlp: object = None) -> list[Span]:
    """Passport-shaped values with a travel document's facts on their line (see module)."""
    spans = [m.span("value") for m in _APIS.finditer(text)]
    return spans + [row.value for row in _documents(text)]


def travel_birth_date_spans(text: str, _nlp: object = None) -> list[Span]:
    """The traveller's date of birth in an airline passenger record's DOCS element, or beside
    a passport in a traveller's row (:data:`_NATIONALITY`)."""
    spans = [m.span("birth") for m in _APIS.finditer(text) if m.group("birth")]
    return spans + [birth for row in _documents(text) for birth in row.births]


def traveller_name_spans(text: str, _nlp: object = None) -> list[Span]:
    """The traveller's name in a traveller's row: its fields written as a name (capitalised
    words, "Lima, Ana", "NGUYEN VAN AN"), a sheet's or a list's separators between fields."""
    return [name for row in _documents(text) for name in row.names]


class _Found(NamedTuple):
    value: Span
    births: tuple[Span, ...] = ()  # a traveller's row: its birth dates
    names: tuple[Span, ...] = ()  # and its name fields


@lru_cache(maxsize=4)  # the three recognisers above ask for the same text in turn
def _documents(text: str) -> tuple[_Found, ...]:
    """Each passport-shaped value taken, with its traveller's row where it has one (a line
    written in lower case read in capitals: :func:`~tasks.pii.context.as_capitals`)."""
    original, text = text, as_capitals(text)
    found: list[_Found] = []
    headers = _headers(text)  # a sheet's lines that name a type or a document column
    for m in _SHAPE.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        line_end = text.find("\n", m.end())
        line_end = len(text) if line_end < 0 else line_end
        lo, hi = max(line_start, m.start() - _WINDOW), min(line_end, m.end() + _WINDOW)
        before, after = text[lo : m.start()], text[m.end() : hi]
        if _claimed(before):
            continue  # "order A1234567, expires...", "frequent flyer BA1234567 for check-in"
        near = f"{before}\n{after}"
        nationality = _nationality(text, lo, hi)
        births = _traveller_births(text, lo, hi) if nationality else ()
        # a traveller's row whose only date is the document's expiry, its holder named in it
        row = bool(nationality and _YEAR_DATE.search(text, lo, hi)) and _holder_in_row(
            original, line_start, line_end
        )
        typed = _typed_p(text, line_start, line_end, m, headers)
        named = _DOCUMENT_AFTER.match(after) is not None  # "... That's my document"
        if m.group(0).isdigit() and (
            _COMPACT_DATE.fullmatch(m.group(0))
            or not (_DOC_WORD.search(before) or births or row or typed or named)
        ):
            continue  # a number alone, or a date written without separators ("19900101")
        if births or row:
            found.append(
                _Found(m.span(), births, _name_fields(original, text, line_start, line_end))
            )
            continue
        cited = _EXPIRY.search(before) or _EXPIRY.search(after) or _identity_check(text, m)
        if (
            typed
            or named
            or _FACTS.search(near)
            or _DEMONYM.search(near)
            or (_RENEWAL.search(after) and _TRIP.search(text))
            or _BIRTH_DATE.search(near)
            or (cited and _DOCUMENT.search(before))
            or _DATA_PAGE.search(near)
            or _DATA_PAGE.search(_record(text, line_start, line_end))
        ):
            found.append(_Found(m.span()))
    return tuple(found)


def _claimed(before: str) -> bool:
    """A thing's word (an order, a booking, a flight) or another number's (loyalty, a voucher)
    labels the value in its own clause; one that only says where the value goes ("for the
    flight, use ...", "the number on my booking to ...") or ends a clause before the value's
    ("a booking ref; checked ID ...") does not."""
    ends = [m.end() for m in _CLAUSE_END.finditer(before)]
    gap = before[ends[-1] :] if ends else before
    return claimed_in(gap, reach=20) or _NOT_DOCUMENT.search(gap[-25:]) is not None


def _holder_in_row(original: str, start: int, end: int) -> bool:
    """A person's name in the row ``original[start:end]``: two or three capitalised words, the
    first a given name ("Traveller 2: Mia Perez, USA, ..."; not "Premium Annual | USA")."""
    if end - start > _ROW_LINE:
        return False
    names = _ROW_NAME.finditer(original, start, end)
    return any(given_first(n.group(0), n.group(0).split()[-1]) for n in names)


def _nationality(text: str, lo: int, hi: int) -> bool:
    """A nationality code in ``text[lo:hi]`` outside every date ("14 MAR 1985": Morocco's code
    is a month there)."""
    dates = [m.span() for m in _YEAR_DATE.finditer(text, lo, hi)]
    return any(
        not any(s <= m.start() and m.end() <= e for s, e in dates)
        for m in _NATIONALITY.finditer(text, lo, hi)
    )


def _traveller_births(text: str, lo: int, hi: int) -> tuple[Span, ...]:
    """The dates in ``text[lo:hi]`` a traveller may have been born on (ten years ago or more)."""
    born_by = date.today().year - 10
    dates = _YEAR_DATE.finditer(text, lo, hi)
    return tuple(m.span() for m in dates if 1900 <= int(m.group("y")) <= born_by)


def _name_fields(original: str, text: str, start: int, end: int) -> tuple[Span, ...]:
    """The fields of the row ``text[start:end]`` written as a name: one to four capitalised
    words, not a code (the nationality, the sex); in a row typed in lower case (``original``),
    one to four words, none an English one."""
    names, at = [], start
    lower = not any(c.isupper() for c in original[start:end])
    for sep in [*_FIELD_SEP.finditer(text, start, end), None]:
        stop = end if sep is None else sep.start()
        field = (_LOWER_NAME_FIELD if lower else _NAME_FIELD).fullmatch(text, at, stop)
        words = field.group("name") if field else ""
        if field and not _CODE.fullmatch(words) and not (lower and _english(words)):
            names.append(field.span("name"))
        at = end if sep is None else sep.end()
    return tuple(names)


def _english(words: str) -> bool:
    return bool(STOP_WORDS.intersection(words.split()))


def _record(text: str, line_start: int, line_end: int) -> str:
    """The short lines around a short line, as a form or a data page prints a record one field
    to a line ("Type: P" above "Number: XDB654321"): up to :data:`_RECORD_LINES` either side,
    up to a blank or a long line ("" where the value's own line is long)."""
    if line_end - line_start > _FORM_LINE:
        return ""
    lo, hi = line_start, line_end
    for _ in range(_RECORD_LINES):
        prev = text.rfind("\n", 0, max(0, lo - 1)) + 1
        if lo == 0 or not text[prev : lo - 1].strip() or lo - 1 - prev > _FORM_LINE:
            break
        lo = prev
    for _ in range(_RECORD_LINES):
        nxt = text.find("\n", hi + 1)
        nxt = len(text) if nxt < 0 else nxt
        if hi >= len(text) or not text[hi + 1 : nxt].strip() or nxt - hi - 1 > _FORM_LINE:
            break
        hi = nxt
    return text[lo:hi]


def _typed_p(
    text: str, line_start: int, line_end: int, m: re.Match[str], headers: tuple[_Header, ...]
) -> bool:
    """The record says the document is of ICAO's type P: near the value on its line or on
    its form's lines, a number's word alone right before the value ("APIS: doc P, nat GBR,
    num 548213307", "Type: P" above "Number: 548213307"; not "type: P, stock no 55012873"),
    or in the row's cell under a sheet's type column (``headers``), the value under a
    number's column ("type,number" above "P,548213307"). Each look is bounded (a window, a
    row's length): a tool result of one long line holds many numbers."""
    lo, hi = max(line_start, m.start() - _WINDOW), min(line_end, m.end() + _WINDOW)
    label = _OWN_NUMBER_WORD.search(text, max(line_start, m.start() - _LABEL_SPAN), m.start())
    if label and (
        _TYPE_P.search(text, lo, hi) or _TYPE_P.search(_record(text, line_start, line_end))
    ):
        return True
    if not headers or line_end - line_start > _ROW_LINE:
        return False
    cells = [c.strip().strip("\"'") for c in _CELL_SEP.split(text[line_start:line_end])]
    # the sheet's header: the nearest line above with a type column and as many cells
    at = bisect_left(headers, (line_start,))
    nearest = headers[max(0, at - _HEADER_TRIES) : at]
    header = next((h for _s, h in reversed(nearest) if len(h) == len(cells)), None)
    if len(cells) < 2 or header is None:
        return False
    row, value = dict(zip(header, cells, strict=True)), m.group(0)
    # the value under a travel document's own column ("guest,doc,country")
    if any(row[h] == value and _DOC_COLUMN.fullmatch(h) for h in row):
        return True
    return any(_TYPE_COLUMN.fullmatch(h) and row[h] == "P" for h in row) and any(
        row[h] == value and _NUMBER_COLUMN.fullmatch(h) for h in row
    )


_Header = tuple[int, tuple[str, ...]]


def _headers(text: str) -> tuple[_Header, ...]:
    """(start, cells) of each line of ``text`` that may head a sheet with a type or document
    column, in order (a short line of two cells or more, one of them such a column's name)."""
    out: list[_Header] = []
    for m in _TYPE_ANYWHERE.finditer(text):
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        end = len(text) if end < 0 else end
        if (out and out[-1][0] == start) or end - start > _ROW_LINE:
            continue
        cells = tuple(h.strip() for h in _CELL_SEP.split(text[start:end]))
        if len(cells) >= 2 and any(_TYPE_COLUMN.fullmatch(h) for h in cells):
            out.append((start, cells))
    return tuple(out)


def _identity_check(text: str, m: re.Match[str]) -> bool:
    """An identity check is what the text is about (within a few lines of the value)."""
    return bool(_IDENTITY_CHECK.search(text, max(0, m.start() - 200), m.end() + 200))
