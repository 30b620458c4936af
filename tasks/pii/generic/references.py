"""Numbers that are references, not people: order, tracking, invoice, case, barcode and part
numbers read as phone or card numbers, dates and timestamps read as phone numbers, version
numbers read as IP addresses, and businesses' toll-free lines.

A phone or card finding is dropped when an order/tracking/reference word or a code that is not
a phone's ("error code", not "area code") stands right before it (only fillers such as "number
is" between) or heads the clause that names it ("order number for the passport photos is
..."), the letters that start the reference's code aside ("tracking number is jd 0146 0000
6281"), when it is written like a date
(``03.04.2025``, ``2024-06-14 08:12``), when it is the tail of a code (``INV-2024-00871``),
when it has fewer than seven digits or more than E.164 allows (an extension aside), when it
is a toll-free number (``1-800-…``, UK ``0800``/``0808``: a company's line, no one's own,
unless the writer calls it theirs: "call me on", "my cell is"), or
when it has the exact shape of a number dropped so in the same text ("part no. 1500-2231-88
replaced by 1500-2231-90"). A dotted quad after "firmware", "version" or "build", or after "roll back to" or "update to",
is a version, not an IP address. A phone or card finding inside a carrier's tracking number
(UPS ``1Z`` and sixteen characters, a run of digit groups longer than any phone or card
number) is part of that number. A card finding whose first digits and length no card issuer
gives is none (ISO/IEC 7812 ranges, ``lexicon/card_issuers.txt``: 0 is no issuer's, 1 the
airlines' fifteen-digit UATP, 7 and 8 the petroleum and telecom industries', a fifteen-digit
number starting 3 is a card only as American Express's 34 or 37): an epoch time in milliseconds, micro- or nanoseconds
(``1733397298063``), a message id (``1261358952548145421``), a zero-padded counter, a handset's
IMEI (``352916895227263``), a SIM's ICCID (``8944…``), Luhn-valid one time in ten by chance
(an IMEI or ICCID always), unless the writer names it a card ("card number: 1..."). A run of
10, 13, 16 or 19 digits that reads as a Unix time in seconds, milli-, micro- or nanoseconds
between 2015 and 2033 is a timestamp, no phone number (a log line's ``created_at=1733321813110``),
unless the writer calls it theirs. A card finding under a label that names a system's or a
document's own number (a noun and "id", "no" or "number": ``request_id=``, ``"traceId": "``,
"job id", "statement no."), the noun no card's, holder's or qualifier's ("pan", "customer
id", "my new number": ``lexicon/label_holders.txt``, ``label_qualifiers.txt``), is none:
Luhn-valid one time in ten by chance; a phone finding only under an id, or as one run of
twelve digits or more under a noun no phone's or person's ("meter number 5107430042885"). A
phone typed as one run of ten digits or more ends with its run: "+447700900123 200 31ms" holds
the number and a log line's status and time. Values under record keys such as ``sku``,
``order_id`` or ``tracking_number`` are references too (see :func:`reference_key`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import regex as re

from tasks.pii.clauses import HOLDER_WORDS, claimed_after, subject_word
from tasks.pii.context import as_capitals
from tasks.pii.generic.fields import norm_key
from tasks.pii.lexicon import STOP_WORDS, alternatives, word_list, words_pattern

if TYPE_CHECKING:
    from presidio_analyzer import RecognizerResult

# account numbers are left alone: "Ref 123-45-678901" may well be one (the account rules
# have their own cue words), and so are the user's custom patterns (settings)
NUMBER_TYPES = frozenset({"PHONE_NUMBER", "CREDIT_CARD"})
# what a reference's number follows: an order's, a parcel's, a product's word, or a carrier's
# name right before the number ("FedEx 771428903365", "DHL 4930228155")
_WORDS = words_pattern("references_things") + "|" + words_pattern("references_carriers")
# a number's word after "case" ("case no.", "case id"), and the words that go before a code
# that is a phone number's own ("area code", "dialling code")
_NUMBER_WORDS = alternatives("references_number_words")
_PHONE_CODES = alternatives("references_phone_code_words")
# what may stand between the word and its number: "order number is", "tracking no.:"
_FILLERS = alternatives("references_fillers")
_BEFORE = re.compile(
    rf"(?i)(?<![a-z])(?:{_WORDS}|case(?=[\s.#-]*(?:{_NUMBER_WORDS}|#))"
    # a code ("error code", "promo code"), but not a phone number's own ("area code")
    rf"|(?<!(?:{_PHONE_CODES})[\s_-])code)"
    r"(?=no|nr|num|id|[^a-z]|$)"  # glued to its number word too: "ordernumber", "trackno"
    rf"(?:[\s:#.-]*(?:{_FILLERS}|=|:|#))*"
    # the reply to a question that named it: "your order number? sure, mine is ..."
    r"(?:\?[\s,]*(?:(?:sure|yes|ok|okay|here)[\s,!.]*)?(?:mine|it'?s|it)(?:\s+(?:is|was))?)?"
    r"[\s:#.=-]*$"
)
_CODE_PREFIX = re.compile(r"(?<![\p{L}\d])(\p{Lu}{1,3})[ -]?$")  # "JD " of "JD 0146 0000 6281"
_REFERENCE_WORD = re.compile(rf"(?i)(?:{_WORDS}|case)")
_DATE = re.compile(r"^\d{1,2}[./-]\d{1,2}[./-](?:\d{4}|\d{2})$|^\d{4}[./-]\d{1,2}[./-]\d{1,2}$")
# a timestamp's date and hour ("2024-06-14 08" of "2024-06-14 08:12:55")
_DATE_TIME = re.compile(r"^(?:\d{4}-\d{2}-\d{2}|\d{1,2}[./]\d{1,2}[./]\d{4})[ T]\d{1,2}$")
# a phone typed as one run of ten digits or more, and a group after a space that is no part
# of it (the number ends where its run does)
_UNBROKEN = re.compile(r"\+?\d{10,}(?=\s+\d)")


def _issuers() -> tuple[tuple[int, int, int, frozenset[int]], ...]:
    """(first digits' length, lowest, highest, card lengths) of each line of
    ``lexicon/card_issuers.txt`` ("2221-2720 16 mastercard", "4 13 visa", "6 12-19 discover ...")."""
    rows = []
    for entry in word_list("card_issuers"):
        prefixes, lengths = entry.split()[:2]
        low, _, high = prefixes.partition("-")
        short, _, long = lengths.partition("-")
        span = range(int(short), int(long or short) + 1)
        rows.append((len(low), int(low), int(high or low), frozenset(span)))
    return tuple(rows)


_ISSUERS = _issuers()
# a Unix time in s, ms, µs or ns; 2015-01-01 to 2033-05-18 in seconds
_EPOCH_DIGITS = (10, 13, 16, 19)
_EPOCH_SECONDS = (1_420_070_400, 2_000_000_000)
# the writer names it a card: "card number: ...", "loyalty card 1...", {"card_number": "1..."},
# "결제 카드 0604..." (Korean "card", glued to what kind: 신용카드, 체크카드번호)
_CARD_BEFORE = re.compile(r"(?i)(?:(?<![a-z])(?:card|cc|pan)(?![a-z])|카드)[^\n\d]{0,25}$")
# a system's or a document's own number: a noun and an identifier's word right before the
# value ("request_id=", "trace id:", "x-request-id: ", "statement no.", "meter number is",
# ``"eventId": "``), the noun no card's or person's (lexicon/label_holders.txt)
# (its number word apart, any case: "trace id", "statement no."; or glued: "traceId")
_LABEL_WORDS = alternatives("references_label_words")
_LABEL_CAMEL_WORDS = alternatives("references_label_camel_words")
_LABEL_BEFORE = re.compile(
    r"(?:(?<![\w'\u2019])([A-Za-z]{2,})[ \t_.-]((?i:"
    + _LABEL_WORDS
    + r"))|(?<![\w'\u2019])([a-z]{2,})("
    + _LABEL_CAMEL_WORDS
    + r"))(?![A-Za-z])[\s\"':=#.-]*(?:(?:is|was)[\s\"':=#-]*)?$"
)
_EXTENSION = re.compile(r"(?i)\s*(?:x|ext\.?)\s*(?=\d)")
_CODE_TAIL = re.compile(r"[A-Za-z0-9][-/]$")  # "INV-2024-" before "00871"
# North America's toll-free area codes: a business's line, never a person's
TOLL_FREE_AREAS = frozenset({"800", "833", "844", "855", "866", "877", "888"})
_TOLL_FREE = re.compile(
    rf"^(?:\+?1[ .-]?)?\(?(?:{'|'.join(sorted(TOLL_FREE_AREAS))})\)?[ .-]?\d{{3}}[ .-]?\d{{4}}$"
    r"|^(?:\+44[ -]?|0)80[08][ -]?\d{3}[ -]?\d{3,4}$"
)
# "call me on", "my cell is": the number after is the writer's, whatever its shape
_CALL_VERBS = alternatives("references_call_verbs")
_MY_LINES = alternatives("references_my_lines")
_MINE_BEFORE = re.compile(
    rf"(?i)(?:\b(?:{_CALL_VERBS})\s+me|"
    rf"\bmy\s+(?:{_MY_LINES}))"
    r"\b[^.\n\d]{0,20}$"
)
# a version's word before a dotted quad ("firmware 4.2.9.7", "build 10.0.19045.3803")
_VERSION_WORDS = alternatives("references_version_words")
# what is done to software: "roll back to 4.2.9.7", "after the update to 2.4.3.12"
_SOFTWARE_VERBS = alternatives("references_software_verbs")
_VERSION_BEFORE = re.compile(
    rf"(?i)(?<![a-z])(?:(?:{_VERSION_WORDS})"
    r"(?:\s*(?:is|was|no\.?|number|:|=|#))*"
    rf"|(?:{_SOFTWARE_VERBS})\s+(?:it\s+|back\s+)?(?:to|from))[\s:#=]*v?$"
)
# a carrier's tracking number written in groups: UPS ("1Z 999 AA1 01 2345 6784"), or a run
# of digit groups longer than any phone or card number (USPS's 20 to 22 digits): a phone or
# card finding inside one is part of it
_UPS = re.compile(r"(?i)(?<![a-z0-9])1Z(?:[ -]?[A-Z0-9]){16}(?![a-z0-9])")
_DIGIT_RUN = re.compile(r"(?<![\w-])\d+(?:[ -]\d+)+(?![\w-])")
_LONGEST_NUMBER = 19
# a record key's own reference words beside _WORDS, and the suffixes after it ("order_id")
_KEY_WORDS = alternatives("references_key_words")
_KEY_SUFFIXES = alternatives("references_key_suffixes")
_KEY = re.compile(
    rf"(?:[a-z0-9_]+_)?(?:{_WORDS}|{_KEY_WORDS}"
    # a code ("code", "error_code", "promo_code"), but not a phone number's own
    rf"|(?<!(?:{_PHONE_CODES})_)code)"
    rf"(?:_(?:{_KEY_SUFFIXES}))?"
)


def reference_key(key: str) -> bool:
    """Whether a record key names a reference (``sku``, ``order_id``, ``trackingNumber``)."""
    return bool(_KEY.fullmatch(norm_key(key)))


def _shape(value: str) -> str:
    return re.sub(r"[A-Za-z]", "A", re.sub(r"\d", "9", value))


def drop_references(
    text: str, findings: Sequence[RecognizerResult], protected: Sequence[tuple[int, int]] = ()
) -> list[RecognizerResult]:
    """``findings`` without the phone and card numbers that are references (see the
    module); ``protected``: spans of values under reference keys."""
    dropped: set[str] = set()
    references: list[tuple[int, int]] = []
    kept = []
    tracking = _tracking_spans(text)
    for r in findings:
        if r.entity_type == "IP_ADDRESS" and _VERSION_BEFORE.search(
            text[max(0, r.start - 20) : r.start]
        ):
            continue
        if r.entity_type not in NUMBER_TYPES:
            kept.append(r)
            continue
        value = text[r.start : r.end]
        if any(s <= r.start and r.end <= e for s, e in tracking):
            continue
        inside = any(s <= r.start and r.end <= e for s, e in protected)
        if r.entity_type == "PHONE_NUMBER" and _not_a_line(text, r.start, value):
            continue
        if r.entity_type == "PHONE_NUMBER" and (run := _UNBROKEN.match(value)):
            # "+447700900123 200 31ms": a number typed in one run ends with it
            r.end = r.start + run.end()
            value = value[: run.end()]
        date = r.entity_type == "PHONE_NUMBER" and _DATE.match(value)
        if (
            inside
            or date
            or _reference_before(text, r.start)
            # the clause naming it is about a reference: "order number for the photos is"
            or _REFERENCE_WORD.fullmatch(subject_word(text, r.start, modifiers=False))
            # or the clause after it: "623018845 is the order number"
            or claimed_after(text, r.end)
        ):
            dropped.add(_shape(value))
            references.append((r.start, r.end))
            continue
        if (r.entity_type == "CREDIT_CARD" and _no_issuer(text, r.start, value)) or _system_number(
            text, r.start, value, r.entity_type
        ):
            continue
        kept.append(r)
    # a shorter finding inside a reference ("Reference 7731 <0045 2291 8810>") is part of it
    return [
        r
        for r in kept
        if r.entity_type not in NUMBER_TYPES
        or _shape(text[r.start : r.end]) not in dropped
        and not any(s <= r.start and r.end <= e for s, e in references)
    ]


def _reference_before(text: str, start: int) -> bool:
    """A reference word right before ``start``, or before the letters that start the
    reference's code ("tracking number is JD 0146 0000 6281", typed in lower case too)."""
    before = text[max(0, start - 40) : start]
    if _BEFORE.search(before):
        return True
    # the whole text's view (cached once per text; its lines decide what is typed in lower case)
    prefix = _CODE_PREFIX.search(as_capitals(text)[max(0, start - 40) : start])
    return bool(
        prefix
        and prefix.group(1).lower() not in STOP_WORDS
        and _BEFORE.search(before[: prefix.start()])
    )


# a run of this many digits is a phone only with its country's code, which a person names
# (lexicon/label_phone_nouns.txt) or writes after "+" or "00"
_INTERNATIONAL = 12
_PHONE_NOUNS = frozenset(
    word
    for name in (
        "label_phone_nouns",
        "name_cues_roles",
        "name_spans_relations",
        "fields_phone_keys",
    )
    for word in word_list(name)
    if word.isalpha()
)


def _not_a_line(text: str, start: int, value: str) -> bool:
    """A phone finding that cannot be a person's line: too few or too many digits, a
    timestamp, the tail of a code, or a toll-free number."""
    number = _EXTENSION.split(value, maxsplit=1)[0]  # "…-9722x32708": an extension's digits
    digits = sum(c.isdigit() for c in number)
    return (
        not 7 <= digits <= 17  # E.164's 15 with the country code, and an "00" exit prefix
        or bool(_DATE_TIME.match(value))
        or bool(_CODE_TAIL.search(text[max(0, start - 2) : start]))
        or (
            bool(_TOLL_FREE.match(value.strip()) or epoch_time(value))
            and not _MINE_BEFORE.search(text, 0, start)
        )
    )


def epoch_time(value: str) -> bool:
    """Whether ``value`` is a run of 10, 13, 16 or 19 digits reading as a Unix time in
    seconds, milli-, micro- or nanoseconds between 2015 and 2033 (see the module)."""
    if not value.isdigit() or len(value) not in _EPOCH_DIGITS:
        return False
    return _EPOCH_SECONDS[0] <= int(value[:10]) < _EPOCH_SECONDS[1]


def _no_issuer(text: str, start: int, value: str) -> bool:
    """A card finding whose first digits and length no card issuer gives (see the module),
    the word "card" not right before it."""
    digits = "".join(c for c in value if c.isdigit())
    return not any(
        low <= int(digits[:width]) <= high and len(digits) in lengths
        for width, low, high, lengths in _ISSUERS
    ) and not _CARD_BEFORE.search(text, max(0, start - 40), start)


def _system_number(text: str, start: int, value: str, entity: str) -> bool:
    """The label right before ``start`` names a system's or a document's own number (a
    request's, a trace's, a statement's: see :data:`_LABEL_BEFORE`), no card's or person's;
    a phone finding only under an id ("eventId", "request_id"), or when it is one run of more
    digits than a country's own numbers have under a noun no phone's, person's or holder's
    ("meter number 5107430042885"; "mum number 447700900123" stays a phone)."""
    label = _LABEL_BEFORE.search(text, max(0, start - 40), start)
    if label is None:
        return False
    noun = (label.group(1) or label.group(3)).lower()
    word = (label.group(2) or label.group(4)).lower()
    if noun in STOP_WORDS or noun in HOLDER_WORDS:
        return False
    if entity == "PHONE_NUMBER" and not word.startswith("id"):
        return value.isdigit() and len(value) >= _INTERNATIONAL and noun not in _PHONE_NOUNS
    return True


def _tracking_spans(text: str) -> list[tuple[int, int]]:
    """UPS tracking numbers, and runs of digit groups with more digits than a phone or card
    number has (a USPS tracking number)."""
    spans = [m.span() for m in _UPS.finditer(text)]
    for m in _DIGIT_RUN.finditer(text):
        if sum(c.isdigit() for c in m.group(0)) > _LONGEST_NUMBER:
            spans.append(m.span())
    return spans
