"""Language-neutral identifier recognisers (every configured language gets them, Korean
too): the context-cued identifiers of :mod:`tasks.pii.generic.identifiers`, pasted secrets,
address fields of JSON and forms, and shapes that identify on their own, written with
look-arounds instead of ``\\b`` so a Hangul particle glued after them does not hide them."""

from __future__ import annotations

from typing import Any

from tasks.pii.generic.secrets import secret_spans
from tasks.pii.generic.travel_documents import (
    travel_birth_date_spans,
    travel_document_spans,
    traveller_name_spans,
)
from tasks.pii.lexicon import alternatives
from tasks.pii.names.spans import address_field_spans

# IPv4 with digit look-arounds (``192.168.0.1로``: no \b before a Hangul particle) and IPv6
_IPV4 = r"(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?!\d|\.\d)"
# four groups of four digits is how cards are written, even one that fails Luhn (mistyped);
# a fifth group makes it a tracking number
_CARD_GROUPS = r"(?<![\d-])\d{4}([ -])\d{4}\1\d{4}\1\d{4}(?![\d-])(?!\1\d)"
# an SSN written with its hyphens, whatever Presidio's validator thinks of its digits
_SSN_SHAPE = r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])"
# "jane dot doe at gmail dot com", "jane(at)example(dot)org"
_SPELLED_EMAIL = (
    r"(?i)(?<![\w.+-])[a-z0-9][\w.+-]*(?:\s+dot\s+[a-z0-9]+)*(?:\s*(?:\(at\)|\[at\])\s*|\s+at\s+)[a-z0-9-]+"
    r"(?:(?:\s*(?:\(dot\)|\[dot\])\s*|\s+dot\s+|\.)[a-z0-9-]+)*"
    rf"(?:\s*(?:\(dot\)|\[dot\])\s*|\s+dot\s+)(?:{alternatives('shapes_email_domains')})(?![a-z])"
)
# an e-mail address glued to what follows (``...@example.com로``: no \b before Hangul)
# (not a login at a host: "ssh -p 2222 ops@bastion.internal", "scp f deploy@web1.example.com:")
_EMAIL = r"(?<![\w.+-])(?=[A-Za-z0-9][\w.+-]*@)(?<!(?:ssh|scp|sftp|mosh)\s+(?:-\w+\s+(?:\d+\s+)?)*(?:\S+\s+)?)[A-Za-z0-9][\w.+-]*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}(?![A-Za-z0-9.-])"
# a Korean resident / foreigner registration number in any text (not only where Hangul is)
_RRN = r"(?<![\d-])\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\s?-?\s?[1-8]\d{6}(?![\d-])"
_IPV6 = (
    r"(?<![\w:])(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}(?![\w:])"
    r"|(?<![\w:])(?:[0-9A-Fa-f]{1,4}:){1,7}:(?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,6})?(?![\w:])"
    r"|(?<![\w:])::(?:[0-9A-Fa-f]{1,4}:){0,6}[0-9A-Fa-f]{1,4}(?![\w:])"
)
# a passport's machine-readable zone (ICAO 9303 TD3), pasted from a scan: the name line
# ("P<GBRSMITH<<JOHN<<<...") and the number line (number, check digit, nationality, birth
# date, sex, expiry), each taken whole, however many fillers the OCR kept
_MRZ = (
    r"(?<![A-Z0-9<])P[A-Z<][A-Z]{3}[A-Z]+(?:<[A-Z]+)*<<[A-Z<]+(?![A-Z0-9<])"
    r"|(?<![A-Z0-9<])[A-Z0-9<]{9}\d[A-Z]{3}\d{6}\d[MFX<]\d{6}\d[A-Z0-9<]*(?![A-Z0-9<])"
)

# a UK driving licence number (DVLA): five letters of the surname (9-padded), the birth
# decade, month (+50 for women) and day, the year's last digit, two initials, a digit and
# two check letters ("MORGA657054SM9IJ"); the date makes it no product code
_UK_LICENCE = (
    r"(?<![A-Za-z0-9])[A-Z9]{5}\s?\d(?:[05][1-9]|[16][0-2])(?:0[1-9]|[12]\d|3[01])\d"
    r"\s?[A-Z9]{2}\d[A-Z]{2}(?![A-Za-z0-9])"
)
# (entity, regex, score, recogniser name); tasks.pii.korean leaves Ipv4Recognizer out by name
SHAPES: tuple[tuple[str, str, float, str], ...] = (
    ("EMAIL_ADDRESS", _EMAIL, 0.6, "GluedEmailRecognizer"),
    ("EMAIL_ADDRESS", _SPELLED_EMAIL, 0.6, "SpelledEmailRecognizer"),
    ("CREDIT_CARD", _CARD_GROUPS, 0.5, "CardGroupsRecognizer"),
    ("US_SSN", _SSN_SHAPE, 0.5, "SsnShapeRecognizer"),
    ("KR_RRN", _RRN, 0.6, "RrnShapeAnyRecognizer"),
    ("IP_ADDRESS", _IPV4, 0.6, "Ipv4Recognizer"),
    ("IP_ADDRESS", _IPV6, 0.6, "Ipv6Recognizer"),
    ("PASSPORT", _MRZ, 0.6, "PassportMrzRecognizer"),
    ("DRIVER_LICENSE", _UK_LICENCE, 0.6, "UkDrivingLicenceRecognizer"),
)


# the identifiers found by a function of the text (entity, name, score, spans, doc)
SPAN_RECOGNIZERS: tuple[tuple[str, str, float, Any, str], ...] = (
    (
        "SECRET",
        "SecretRecognizer",
        0.7,
        lambda text, nlp: list(secret_spans(text, nlp)),
        "Pasted keys, tokens and passwords (see tasks.pii.generic.secrets).",
    ),
    (
        "PASSPORT",
        "TravelDocumentRecognizer",
        0.6,
        travel_document_spans,
        "Passport numbers beside a nationality, expiry or issuing country.",
    ),
    (
        "DATE_OF_BIRTH",
        "TravelRecordBirthDateRecognizer",
        0.6,
        travel_birth_date_spans,
        "The date of birth in an airline passenger record (DOCS element) or a traveller's row.",
    ),
    (
        "PERSON",
        "TravellerRowNameRecognizer",
        0.6,
        traveller_name_spans,
        "The traveller's name in a row with a passport, a nationality code and a birth date.",
    ),
    (
        "LOCATION",
        "AddressFieldRecognizer",
        0.6,
        address_field_spans,
        "Values of address fields in JSON and forms.",
    ),
)
