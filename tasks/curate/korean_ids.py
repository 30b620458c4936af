"""Korean structured identifiers as people type them: resident and foreigner registration
numbers (``.``, `` - ``, full-width forms), passports, driver's licences, dates of birth,
phones, bank accounts glued to the bank's name, cards, IPs glued to particles, car plates,
medical/insurance ids and pasted secrets.

Each identifier is an :class:`IdSpec`: a value regex, an optional context (words that must come
shortly before, e.g. ``여권`` for a foreign passport) and a veto context (``주문번호``,
``송장``: an order or tracking number is not personal data). Checksums raise confidence but are
never required: many numbers people type are test numbers or were issued after the October 2020
RRN reform, which dropped the check digit, and a missed RRN is a privacy breach while a
replaced 6+7 digit run costs one token of one example.

Patterns never use ``\\b``: Hangul is a word character, so ``192.168.0.1에서`` or
``국민은행123-45-678901`` has no word boundary at the digits.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass

import regex as re

HY = r"[-‐‑‒–—―−﹘﹣－]"  # every dash people (and word processors) type; NFKC folds only some
_SEP = rf"(?:\s*(?:{HY}|\.|·|_)\s*|\s+)"
_GAP = rf"(?:\s?{HY}\s?|\s|\.)"  # one separator between digit groups
_ORDER_WORDS = (
    r"주문|송장|운송장|택배|배송조회|접수|예약|모델|시리얼|일련|제품|상품|품번|사건|티켓|쿠폰|"
    r"영수증|승인|결제번호|거래번호|문의번호|관리번호|바코드|"
    r"(?<![A-Za-z])(?:order|tracking|invoice|sku|serial|model|ticket|ref|case|awb|s/n)(?![a-z])"
)
_BANKS = (
    r"은행|뱅크|bank|계좌|입금|송금|이체|예금주|환불|농협|국민|신한|우리|하나|기업|카뱅|카카오|"
    r"토스|케이뱅크|새마을|우체국|수협|신협|씨티|SC|IBK|KB|NH|산업|저축|우정사업"
)
_PLATE_LETTERS = "가나다라마거너더러머버서어저고노도로모보소오조구누두루무부수우주아바사자하허호배"
_PROVINCES = "서울|부산|대구|인천|광주|대전|울산|세종|경기|강원|충북|충남|전북|전남|경북|경남|제주"
_UNIT_AFTER = r"(?![\d]|\s?(?:원|개|명|회|일|월|년|분|초|시간|점|권|대|건|km|kg|%|만|천|억))"


@dataclass(frozen=True)
class IdSpec:
    """One identifier shape: ``entity`` wherever ``value`` matches (group ``v`` when present),
    only after ``context`` (within ``window`` characters) when one is given, never after
    ``veto`` (within ``window``), and only where ``valid`` (if any) accepts the value."""

    entity: str
    value: re.Pattern[str]
    score: float
    context: re.Pattern[str] | None = None
    veto: re.Pattern[str] | None = None
    window: int = 24
    valid: Callable[[str], bool] | None = None
    after: int = 0  # the context may also follow the value within this many characters
    veto_after: re.Pattern[str] | None = None  # what must not follow right after the value
    classify: Callable[[str, str], str] | None = None  # (value, text before) -> entity


def _c(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags | re.V1)


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


def _ipv6_ok(value: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(value), ipaddress.IPv6Address)
    except ValueError:
        return False


def _digit_count(lo: int, hi: int) -> Callable[[str], bool]:
    return lambda v: lo <= sum(c.isdigit() for c in v) <= hi


def _secretish(value: str) -> bool:
    """A pasted password or key has a digit or symbol or mixed case; an ordinary word has not."""
    if len(value) < 4 or re.search(r"[\p{Hangul}]", value):
        return False
    has_digit = any(c.isdigit() for c in value)
    has_symbol = any(not c.isalnum() for c in value)
    mixed = any(c.isupper() for c in value) and any(c.islower() for c in value)
    return has_digit or has_symbol or mixed


_VETO_WINDOW = 16
_FOLD = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}
_ORDER = _c(rf"(?i:{_ORDER_WORDS})")
_RRN_CTX = _c(r"(?i:주민|주번|등록번호|외국인|생년|신분|RRN|ARC|FRN|resident|registration)")
_MASK = r"[*xX●○■□＊]"
_RRN_SPECS = [
    # 6 + 7 with a separator (or a masked tail): nothing else is written this way
    IdSpec(
        "KR_RRN",
        _c(rf"(?<![\d{HY}.])\d{{6}}{_SEP}[1-8](?:\d{{6}}|{_MASK}{{6}})(?![\d{HY}])"),
        0.75,
        classify=_rrn_kind,
    ),
    IdSpec("KR_RRN", _c(rf"(?<![\d{HY}.])\d{{6}}\s*{HY}\s*{_MASK}{{7}}"), 0.6),
    IdSpec(
        "KR_RRN",
        _c(r"(?<![\d.])\d{6}[1-8]\d{6}(?!\d)"),
        0.6,
        veto=_ORDER,
        valid=_bare_rrn_ok,
        classify=_rrn_kind,
    ),
    IdSpec(
        "KR_RRN",
        _c(r"(?<![\d.])\d{13}(?!\d)"),
        0.6,
        context=_RRN_CTX,
        classify=_rrn_kind,
    ),
]

_RRN_SPECS += [
    IdSpec(  # "990909-2": the birth date and the sex digit, after 주민번호
        "KR_RRN", _c(rf"(?<![\d{HY}])\d{{6}}\s?{HY}\s?[1-8](?![\d*xX●○])"), 0.6, context=_RRN_CTX
    ),
    IdSpec(  # the halves given apart: "뒷자리 1234567", "앞자리 850505"
        "KR_RRN",
        _c(rf"(?<![\d{HY}.])(?:[1-8]\d{{6}}|\d{{6}})(?![\d{HY}.])"),
        0.55,
        context=_RRN_CTX,
        window=30,
        veto=_ORDER,
    ),
]

_PASSPORT_CTX = _c(r"(?i:여권|passport|旅券|pasaporte|reisepass|passeport|pp\s?no)")
_PASSPORT_SPECS = [
    IdSpec(  # Korean passports: old M12345678, new (2021) M123A4567
        "PASSPORT",
        _c(r"(?<![A-Za-z0-9])[MSRGDTOmsrgdto](?:\d{8}|\d{3}[A-Za-z]\d{4})(?![A-Za-z0-9])"),
        0.6,
        veto=_ORDER,
    ),
    IdSpec(  # any country's number after the word "passport"
        "PASSPORT",
        _c(r"(?<![A-Za-z0-9])(?=[A-Za-z]{0,3}\d)[A-Za-z0-9]{6,10}(?![A-Za-z0-9])"),
        0.7,
        context=_PASSPORT_CTX,
        window=30,
    ),
]

_LICENCE_CTX = _c(r"(?i:면허|licen[cs]e|DL\b|운전)")
_LICENCE_SPECS = [
    IdSpec(  # 11-12-345678-90, 서울 12-345678-90
        "DRIVER_LICENSE",
        _c(
            rf"(?<![\d{HY}])(?:(?:{_PROVINCES}|경기남부|경기북부)\s?|\d{{2}}\s*{HY}\s*)"
            rf"\d{{2}}\s*{HY}\s*\d{{6}}\s*{HY}\s*\d{{2}}(?![\d{HY}])"
        ),
        0.75,
    ),
    IdSpec(
        "DRIVER_LICENSE",
        _c(
            rf"(?<![\d{HY}])(?:(?:{_PROVINCES}|경기남부|경기북부)\s?|\d{{2}}(?:{_GAP})?)"
            rf"\d{{2}}(?:{_GAP})?\d{{6}}(?:{_GAP})?\d{{2}}(?![\d{HY}])"
        ),
        0.7,
        context=_LICENCE_CTX,
        window=30,
    ),
    IdSpec(  # foreign licences: letters and digits after the word
        "DRIVER_LICENSE",
        _c(r"(?<![A-Za-z0-9])(?=[A-Za-z]{0,3}\d)[A-Za-z0-9][A-Za-z0-9-]{5,16}(?![A-Za-z0-9])"),
        0.6,
        context=_LICENCE_CTX,
        window=30,
    ),
]

_DOB_CTX = _c(
    r"(?i:생년월일|생일|생신|출생|태어|생년|d\.?o\.?b|date of birth|birth\s?date|born|birthday)"
)
_DATE_FORMS = (
    r"(?:\d{2,4}\s*년\s*\d{1,2}\s*월\s*\d{1,2}\s*일"
    rf"|(?<![\d.])\d{{2,4}}\s?(?:[./]|{HY})\s?\d{{1,2}}\s?(?:[./]|{HY})\s?\d{{1,2}}(?!\d)\.?"
    r"|(?<!\d)(?:\d{6}|\d{8})(?!\d)"
    r"|(?i:\d{1,2}\s(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?,?\s\d{4})"
    r"|(?i:(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s\d{1,2},?\s\d{4}))"
)
_DOB_SPECS = [
    IdSpec("DATE_OF_BIRTH", _c(_DATE_FORMS), 0.7, context=_DOB_CTX, window=40, after=16),
    IdSpec(  # "1990년 3월 5일생", "90.03.05생": the suffix says birth
        "DATE_OF_BIRTH",
        _c(
            r"(?<!\d)(?:\d{2,4}\s*년\s*\d{1,2}\s*월\s*\d{1,2}\s*일|\d{2,4}[./]\d{1,2}[./]\d{1,2})"
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
    IdSpec(
        "PHONE_NUMBER",
        _c(
            rf"(?<![\d+]){_PHONE_PREFIX}\s*(?:{HY}|\.|\))?\s*\d{{3,4}}\s*(?:{HY}|\.)?\s*"
            rf"\d{{4}}(?!\d)"
        ),
        0.7,
    ),
]

_BANK_CTX = _c(rf"(?i:{_BANKS})")
_ACCOUNT_SPECS = [
    IdSpec(  # after a bank's name or 계좌: groups split by dashes, spaces or nothing
        "BANK_ACCOUNT",
        _c(rf"(?<![\d{HY}])\d{{1,16}}(?:{_GAP}\d{{1,8}}){{0,4}}(?![\d{HY}])"),
        0.6,
        context=_BANK_CTX,
        veto=_ORDER,
        window=20,
        after=12,
        valid=_digit_count(10, 16),
    ),
    IdSpec(  # hyphenated groups as banks print them, unless an order/tracking number
        "BANK_ACCOUNT",
        _c(rf"(?<![\d{HY}.])\d{{2,6}}(?:{HY}\d{{2,8}}){{1,3}}(?![\d{HY}])"),
        0.45,
        veto=_ORDER,
        valid=_digit_count(10, 16),
    ),
]

_CARD_CTX = _c(r"(?i:카드|card|신용|체크|visa|master|비자|마스터|아멕스|amex|jcb|결제)")
_CARD_GROUPS = (
    rf"(?<![\d{HY}])\d{{4}}(?:{_GAP}(?:\d{{4}}|{_MASK}{{4}})){{2}}{_GAP}\d{{3,4}}(?![\d{HY}])"
)
_CARD_SPECS = [
    IdSpec("CREDIT_CARD", _c(_CARD_GROUPS), 0.6, context=_CARD_CTX, window=24),
    IdSpec("CREDIT_CARD", _c(r"(?<!\d)\d{15,16}(?!\d)"), 0.6, context=_CARD_CTX, window=24),
    IdSpec("CREDIT_CARD", _c(_CARD_GROUPS), 0.4, veto=_ORDER),
]

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_NET_SPECS = [
    IdSpec(
        "IP_ADDRESS",
        _c(rf"(?<![\d.])(?<!(?i:v|ver|버전|version)\s?){_OCTET}(?:\.{_OCTET}){{3}}(?![\d]|\.\d)"),
        0.7,
        veto_after=_c(r"\s?(?i:버전|ver|version|릴리스|패치)"),
    ),
    IdSpec(
        "IP_ADDRESS",
        _c(r"(?<![0-9A-Fa-f:])(?=[0-9A-Fa-f:]*::?[0-9A-Fa-f])[0-9A-Fa-f:]{2,39}(?![0-9A-Fa-f:])"),
        0.7,
        valid=_ipv6_ok,
    ),
    IdSpec(
        "EMAIL_ADDRESS",
        _c(
            r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9-]+"
            r"(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![A-Za-z0-9])"
        ),
        0.8,
    ),
    IdSpec("US_SSN", _c(rf"(?<![\d{HY}])\d{{3}}{HY}\d{{2}}{HY}\d{{4}}(?![\d{HY}])"), 0.5),
]

_PLATE_SPECS = [
    IdSpec(  # 12가3456, 123가 4567, 서울12가3456
        "KR_CAR_PLATE",
        _c(
            rf"(?<![\d\p{{Hangul}}])(?:(?:{_PROVINCES})\s?)?(?<!\d)\d{{2,3}}\s?[{_PLATE_LETTERS}]"
            rf"\s?\d{{4}}{_UNIT_AFTER}"
        ),
        0.65,
    ),
]

_MEDICAL_CTX = _c(
    r"(?i:의료보험|건강보험|건보|보험증|보험번호|보험카드|환자번호|진료|수진자|차트번호|병록번호|의무기록|"
    r"의료급여|가입자번호|피보험자|증번호|증권번호|보험\s?가입|(?<!주민|외국인|사업자|차량)\s?등록번호|환자\s?id|MRN|"
    r"medical record|patient\s?(?:id|no|number)|member\s?(?:id|no)|insurance|policy)"
)
_MEDICAL_SPECS = [
    IdSpec(
        "MEDICAL_ID",
        _c(
            r"(?<![A-Za-z0-9-])(?=[A-Za-z0-9-]*\d{3})[A-Za-z0-9][A-Za-z0-9-]{4,20}"
            r"(?<![-])(?![A-Za-z0-9])"
        ),
        0.6,
        context=_MEDICAL_CTX,
        window=24,
        after=12,
    ),
]

_SECRET_CTX = (
    r"(?i:비밀\s?번호|비번|패스워드|password|passwd|pwd|pw|암호|토큰|token|api[\s_-]?key|"
    r"api\s?키|시크릿|secret|인증키|액세스\s?키|access[\s_-]?key|private[\s_-]?key|키값|apikey)"
)
_SECRET_SPECS = [
    IdSpec(
        "SECRET",
        _c(
            rf"{_SECRET_CTX}(?:\s?(?i:키|key))?(?:\s?(?:은|는|이|가|을|를|도|값|번호))?[\"']?\s*"
            r"(?:[:=：]|->|→|is)?\s*"
            r"[\"'“‘`]?(?P<v>[^\s\"'”’`,\p{Hangul}]{4,120})"
        ),
        0.7,
        valid=_secretish,
    ),
    IdSpec(  # a quoted token a little after the word "password"
        "SECRET",
        _c(r"[\"'“‘`](?P<v>[^\s\"'”’`\p{Hangul}]{6,120})[\"'”’`]"),
        0.6,
        context=_c(_SECRET_CTX),
        window=30,
        valid=_secretish,
    ),
    IdSpec(  # a password typed a little after the word, without quotes ("비번 ... happy0915")
        "SECRET",
        _c(
            r"(?<![\w@./:-])(?=[A-Za-z0-9!@#$%^&*_-]*\d)(?=[A-Za-z0-9!@#$%^&*_-]*[A-Za-z])"
            r"[A-Za-z0-9!@#$%^&*_-]{6,64}(?![\w@./:-])"
        ),
        0.5,
        context=_c(_SECRET_CTX),
        window=30,
    ),
    IdSpec(  # well-known key shapes, anywhere
        "SECRET",
        _c(
            r"(?<![A-Za-z0-9_-])(?:AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}"
            r"|(?:sk|pk|rk)_(?:live|test)_[0-9A-Za-z]{10,}|sk-[A-Za-z0-9_-]{20,}"
            r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}"
            r"|AIza[0-9A-Za-z_-]{30,}|\d{8,10}:[A-Za-z0-9_-]{30,}"
            r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
            r"|glpat-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{20,}|whsec_[A-Za-z0-9]{16,})"
        ),
        0.8,
    ),
]

ID_SPECS: tuple[IdSpec, ...] = (
    *_RRN_SPECS,
    *_PASSPORT_SPECS,
    *_LICENCE_SPECS,
    *_DOB_SPECS,
    *_PHONE_SPECS,
    *_ACCOUNT_SPECS,
    *_CARD_SPECS,
    *_NET_SPECS,
    *_PLATE_SPECS,
    *_MEDICAL_SPECS,
    *_SECRET_SPECS,
)


def _near(pattern: re.Pattern[str] | None, text: str, start: int, window: int) -> bool:
    if pattern is None:
        return False
    return pattern.search(text, max(0, start - window), start) is not None


def _vetoed(pattern: re.Pattern[str] | None, text: str, start: int) -> bool:
    """An order/tracking word shortly before the value, in the same sentence."""
    if pattern is None:
        return False
    lo = max(0, start - _VETO_WINDOW)
    stop = max(text.rfind(c, lo, start) for c in ".?!\n")
    return pattern.search(text, max(lo, stop + 1), start) is not None


def fold_width(text: str) -> str:
    """Full-width ASCII (``９００３０５－１``) and the ideographic space as their ASCII forms, one
    character for one, so offsets stay those of ``text`` (the engine may NFKC first; this keeps
    the recognisers right on text that did not go through it)."""
    return text.translate(_FOLD)


def id_spans(text: str, specs: tuple[IdSpec, ...] = ID_SPECS) -> list[tuple[int, int, str, float]]:
    """``(start, end, entity, score)`` of every identifier of ``specs`` in ``text``."""
    text = fold_width(text)
    found = []
    for spec in specs:
        if spec.context is not None and not spec.context.search(text):
            continue  # the cheap test first: most texts mention no passport
        for m in spec.value.finditer(text):
            group = "v" if "v" in spec.value.groupindex else 0
            start, end = m.span(group)
            value = m.group(group)
            if spec.context is not None and not (
                _near(spec.context, text, start, spec.window)
                or (spec.after and spec.context.search(text, end, end + spec.after))
            ):
                continue
            if _vetoed(spec.veto, text, start) or (
                spec.veto_after is not None and spec.veto_after.match(text, end)
            ):
                continue
            if spec.valid is not None and not spec.valid(value):
                continue
            entity = spec.classify(value, text[:start]) if spec.classify else spec.entity
            found.append((start, end, entity, spec.score))
    return found
