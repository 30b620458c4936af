"""Korean structured identifiers as people type them: resident and foreigner registration
numbers (``.``, `` - ``, full-width forms), passports, driver's licences, dates of birth,
phones, bank accounts glued to the bank's name and cards; the IPs, plates, medical ids and
secrets of :mod:`tasks.pii.korean.net_ids` join them in :data:`ID_SPECS`.

Each identifier is a value-first :class:`~tasks.pii.context.ContextRule`: a value regex, an optional
context (words that must come shortly before, e.g. ``여권`` for a foreign passport) and a veto
context (``주문번호``, ``송장``: an order or tracking number is not personal data).

Checksums raise confidence but are never required: many numbers people type are test numbers
or were issued after the October 2020 RRN reform, which dropped the check digit, and a missed
RRN is a privacy breach while a replaced 6+7 digit run costs one token of one example.
"""

from __future__ import annotations

from collections.abc import Callable

import regex as re

from tasks.pii.context import ContextRule, match_rules
from tasks.pii.korean.idspec import GAP, HY, PROVINCES, SEP, compile_v1, near
from tasks.pii.korean.net_ids import MEDICAL_SPECS, NET_SPECS, PLATE_SPECS, SECRET_SPECS
from tasks.pii.lexicon import alternatives, words_pattern

__all__ = ["ID_SPECS", "id_spans", "rrn_checksum_ok"]

# order, tracking, receipt and model numbers' words: a number after one is not personal data
_ORDER_WORDS = (
    alternatives("korean_ids_order_words")
    + r"|(?<![A-Za-z])(?:"
    + alternatives("korean_ids_order_words_en")
    + r")(?![a-z])"
)
_BANKS = alternatives("korean_ids_bank_words")  # banking words and bank names before an account


def rrn_checksum_ok(value: str) -> bool:
    """The resident registration number check digit (numbers issued before October 2020)."""
    digits = [int(c) for c in value if c.isdigit()]
    if len(digits) != 13:
        return False
    total = sum(
        d * w for d, w in zip(digits[:12], (2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5), strict=True)
    )
    return (11 - total % 11) % 10 == digits[12]


def _birth_date_ok(value: str) -> bool:
    digits = "".join(c for c in value if c.isdigit())
    month, day = int(digits[2:4]), int(digits[4:6])
    return 1 <= month <= 12 and 1 <= day <= 31


def _rrn_kind(value: str, before: str) -> str:
    """Foreigners' numbers carry 5-8 as the seventh digit (or are introduced as such)."""
    digits = [c for c in value if c.isdigit() or c in "*xX●○"]
    seventh = digits[6] if len(digits) > 6 else "1"
    foreign = seventh in "5678" or re.search(r"외국인|등록증|alien|ARC|FRN", before[-24:])
    return "KR_FRN" if foreign else "KR_RRN"


def _bare_rrn_ok(value: str) -> bool:
    return _birth_date_ok(value) or rrn_checksum_ok(value)


def _digit_count(lo: int, hi: int) -> Callable[[str], bool]:
    return lambda v: lo <= sum(c.isdigit() for c in v) <= hi


_ORDER = compile_v1(rf"(?i:{_ORDER_WORDS})")
_RRN_CTX = compile_v1("(?i:" + alternatives("korean_ids_rrn_words") + ")")
_MASK = r"[*xX●○■□＊]"
_RRN_SPECS = [
    # 6 + 7 with a separator (or a masked tail): nothing else is written this way
    near(
        "KR_RRN",
        compile_v1(rf"(?<![\d{HY}.])\d{{6}}{SEP}[1-8](?:\d{{6}}|{_MASK}{{6}})(?![\d{HY}])"),
        0.75,
        classify=_rrn_kind,
    ),
    near("KR_RRN", compile_v1(rf"(?<![\d{HY}.])\d{{6}}\s*{HY}\s*{_MASK}{{7}}"), 0.6),
    near(
        "KR_RRN",
        compile_v1(r"(?<![\d.])\d{6}[1-8]\d{6}(?!\d)"),
        0.6,
        veto=_ORDER,
        valid=_bare_rrn_ok,
        classify=_rrn_kind,
    ),
    near(
        "KR_RRN",
        compile_v1(r"(?<![\d.])\d{13}(?!\d)"),
        0.6,
        context=_RRN_CTX,
        classify=_rrn_kind,
    ),
]

_RRN_SPECS += [
    near(  # "990909-2": the birth date and the sex digit, after 주민번호
        "KR_RRN",
        compile_v1(rf"(?<![\d{HY}])\d{{6}}\s?{HY}\s?[1-8](?![\d*xX●○])"),
        0.6,
        context=_RRN_CTX,
    ),
    near(  # the halves given apart: "뒷자리 1234567", "앞자리 850505"
        "KR_RRN",
        compile_v1(rf"(?<![\d{HY}.])(?:[1-8]\d{{6}}|\d{{6}})(?![\d{HY}.])"),
        0.55,
        context=_RRN_CTX,
        window=30,
        veto=_ORDER,
    ),
]

_PASSPORT_CTX = compile_v1(f"(?i:{words_pattern('passport_words')})")
_PASSPORT_SPECS = [
    near(  # Korean passports: old M12345678, new (2021) M123A4567
        "PASSPORT",
        compile_v1(r"(?<![A-Za-z0-9])[MSRGDTOmsrgdto](?:\d{8}|\d{3}[A-Za-z]\d{4})(?![A-Za-z0-9])"),
        0.6,
        veto=_ORDER,
    ),
    near(  # any country's number after the word "passport"
        "PASSPORT",
        compile_v1(r"(?<![A-Za-z0-9])(?=[A-Za-z]{0,3}\d)[A-Za-z0-9]{6,10}(?![A-Za-z0-9])"),
        0.7,
        context=_PASSPORT_CTX,
        window=30,
    ),
]

_LICENCE_CTX = compile_v1(r"(?i:면허|licen[cs]e|DL\b|운전)")
_LICENCE_SPECS = [
    near(  # 11-12-345678-90, 서울 12-345678-90
        "DRIVER_LICENSE",
        compile_v1(
            rf"(?<![\d{HY}])(?:(?:{PROVINCES}|경기남부|경기북부)\s?|\d{{2}}\s*{HY}\s*)"
            rf"\d{{2}}\s*{HY}\s*\d{{6}}\s*{HY}\s*\d{{2}}(?![\d{HY}])"
        ),
        0.75,
    ),
    near(
        "DRIVER_LICENSE",
        compile_v1(
            rf"(?<![\d{HY}])(?:(?:{PROVINCES}|경기남부|경기북부)\s?|\d{{2}}(?:{GAP})?)"
            rf"\d{{2}}(?:{GAP})?\d{{6}}(?:{GAP})?\d{{2}}(?![\d{HY}])"
        ),
        0.7,
        context=_LICENCE_CTX,
        window=30,
    ),
    near(  # foreign licences: letters and digits after the word
        "DRIVER_LICENSE",
        compile_v1(
            r"(?<![A-Za-z0-9])(?=[A-Za-z]{0,3}\d)[A-Za-z0-9][A-Za-z0-9-]{5,16}(?![A-Za-z0-9])"
        ),
        0.6,
        context=_LICENCE_CTX,
        window=30,
    ),
]

_DOB_CTX = compile_v1("(?i:" + alternatives("korean_ids_birth_words") + ")")
_MONTHS = alternatives("month_abbreviations")  # jan, feb, ... dec
_DATE_FORMS = (
    r"(?:\d{2,4}\s*년\s*\d{1,2}\s*월\s*\d{1,2}\s*일"
    rf"|(?<![\d.])\d{{2,4}}\s?(?:[./]|{HY})\s?\d{{1,2}}\s?(?:[./]|{HY})\s?\d{{1,2}}(?!\d)\.?"
    r"|(?<!\d)(?:\d{6}|\d{8})(?!\d)"
    rf"|(?i:\d{{1,2}}\s(?:{_MONTHS})[a-z]*\.?,?\s\d{{4}})"
    rf"|(?i:(?:{_MONTHS})[a-z]*\.?\s\d{{1,2}},?\s\d{{4}}))"
)
_DOB_SPECS = [
    near("DATE_OF_BIRTH", compile_v1(_DATE_FORMS), 0.7, context=_DOB_CTX, window=40, after=16),
    near(  # "1990년 3월 5일생", "90.03.05생", "1990-03-14 생이에요": the suffix says birth
        "DATE_OF_BIRTH",
        compile_v1(
            r"(?<!\d)(?:\d{2,4}\s*년\s*\d{1,2}\s*월\s*\d{1,2}\s*일"
            rf"|\d{{2,4}}(?:[./]|{HY})\d{{1,2}}(?:[./]|{HY})\d{{1,2}})"
            r"(?=\s?생(?![\p{Hangul}&&[^은이의으]]))"
        ),
        0.7,
    ),
]

_PHONE_PREFIX = (
    r"(?:\+\s?82[\s-]*(?:\(0\))?[\s-]*\(?0?(?:1[016789]|2|[3-6][1-5]|70)\)?"
    r"|\(\s?0(?:1[016789]|2|[3-6][1-5]|70)\s?\)"
    r"|0(?:1[016789]|2|[3-6][1-5]|70|50\d?|80))"
)
_PHONE_SPECS = [
    near(
        "PHONE_NUMBER",
        compile_v1(
            rf"(?<![\d+]){_PHONE_PREFIX}\s*(?:{HY}|\.|\))?\s*\d{{3,4}}\s*(?:{HY}|\.)?\s*"
            rf"\d{{4}}(?!\d)"
        ),
        0.7,
    ),
]

_BANK_CTX = compile_v1(rf"(?i:{_BANKS})")
# "2024061298765 주문 건 환불": the word after the number says it is an order's
_ORDER_NEXT = compile_v1(r"\s*(?:번\s*)?(?:" + alternatives("korean_ids_order_next_words") + ")")
_ACCOUNT_SPECS = [
    near(  # after a bank's name or 계좌: groups split by dashes, spaces or nothing
        "BANK_ACCOUNT",
        compile_v1(rf"(?<![\d{HY}])\d{{1,16}}(?:{GAP}\d{{1,8}}){{0,4}}(?![\d{HY}])"),
        0.6,
        context=_BANK_CTX,
        veto=_ORDER,
        window=20,
        after=12,
        valid=_digit_count(10, 16),
        veto_after=_ORDER_NEXT,
    ),
    near(  # hyphenated groups as banks print them, unless an order/tracking number
        "BANK_ACCOUNT",
        compile_v1(rf"(?<![\d{HY}.])\d{{2,6}}(?:{HY}\d{{2,8}}){{1,3}}(?![\d{HY}])"),
        0.45,
        veto=_ORDER,
        valid=_digit_count(10, 16),
        veto_after=_ORDER_NEXT,
    ),
]

_CARD_CTX = compile_v1("(?i:" + alternatives("korean_ids_card_words") + ")")
_CARD_GROUPS = (
    rf"(?<![\d{HY}])\d{{4}}(?:{GAP}(?:\d{{4}}|{_MASK}{{4}})){{2}}{GAP}\d{{3,4}}(?![\d{HY}])"
)
_CARD_SPECS = [
    near("CREDIT_CARD", compile_v1(_CARD_GROUPS), 0.6, context=_CARD_CTX, window=24),
    near("CREDIT_CARD", compile_v1(r"(?<!\d)\d{15,16}(?!\d)"), 0.6, context=_CARD_CTX, window=24),
    near("CREDIT_CARD", compile_v1(_CARD_GROUPS), 0.4, veto=_ORDER),
]
ID_SPECS: tuple[ContextRule, ...] = (
    *_RRN_SPECS,
    *_PASSPORT_SPECS,
    *_LICENCE_SPECS,
    *_DOB_SPECS,
    *_PHONE_SPECS,
    *_ACCOUNT_SPECS,
    *_CARD_SPECS,
    *NET_SPECS,
    *PLATE_SPECS,
    *MEDICAL_SPECS,
    *SECRET_SPECS,
)


def id_spans(text: str) -> list[tuple[int, int, str, float]]:
    """``(start, end, entity, score)`` of every Korean-text identifier in ``text``."""
    return match_rules(text, ID_SPECS)
