"""Korean-text identifiers beyond the registration-number family: IPv4/IPv6 and e-mails glued to
particles, US SSNs, car plates (``12가3456``, ``서울12가3456``), medical and insurance ids after
their context words, and pasted secrets (keys, tokens, passwords after 비밀번호/비번/토큰).
"""

from __future__ import annotations

import ipaddress

import regex as re

from tasks.pii.korean.idspec import HY, PROVINCES, compile_v1, near
from tasks.pii.lexicon import alternatives

_PLATE_LETTERS = "가나다라마거너더러머버서어저고노도로모보소오조구누두루무부수우주아바사자하허호배"
# a unit or counter after a plate-shaped number: a quantity (12가3456원), not a plate
_UNIT_AFTER = r"(?![\d]|\s?(?:" + alternatives("korean_net_ids_units") + "))"


def _ipv6_ok(value: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(value), ipaddress.IPv6Address)
    except ValueError:
        return False


def _secretish(value: str) -> bool:
    """A pasted password or key has a digit or symbol or mixed case; an ordinary word has not."""
    if len(value) < 4 or re.search(r"[\p{Hangul}]", value):
        return False
    has_digit = any(c.isdigit() for c in value)
    has_symbol = any(not c.isalnum() for c in value)
    mixed = any(c.isupper() for c in value) and any(c.islower() for c in value)
    return has_digit or has_symbol or mixed


_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
NET_SPECS = [
    near(
        "IP_ADDRESS",
        compile_v1(
            rf"(?<![\d.])(?<!(?i:v|ver|버전|version)\s?){_OCTET}(?:\.{_OCTET}){{3}}(?![\d]|\.\d)"
        ),
        0.7,
        veto_after=compile_v1(r"\s?(?i:버전|ver|version|릴리스|패치)"),
    ),
    near(
        "IP_ADDRESS",
        compile_v1(
            r"(?<![0-9A-Fa-f:])(?=[0-9A-Fa-f:]*::?[0-9A-Fa-f])[0-9A-Fa-f:]{2,39}(?![0-9A-Fa-f:])"
        ),
        0.7,
        valid=_ipv6_ok,
    ),
    near(
        "EMAIL_ADDRESS",
        compile_v1(
            r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9-]+"
            r"(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![A-Za-z0-9])"
        ),
        0.8,
    ),
    near("US_SSN", compile_v1(rf"(?<![\d{HY}])\d{{3}}{HY}\d{{2}}{HY}\d{{4}}(?![\d{HY}])"), 0.5),
]

PLATE_SPECS = [
    near(  # 12가3456, 123가 4567, 서울12가3456
        "KR_CAR_PLATE",
        compile_v1(
            rf"(?<![\d\p{{Hangul}}])(?:(?:{PROVINCES})\s?)?(?<!\d)\d{{2,3}}\s?[{_PLATE_LETTERS}]"
            rf"\s?\d{{4}}{_UNIT_AFTER}"
        ),
        0.65,
    ),
]

# medical and insurance words: 건강보험, 환자번호, 차트번호, MRN, insurance
_MEDICAL_CTX = compile_v1("(?i:" + alternatives("korean_net_ids_medical_words") + ")")
MEDICAL_SPECS = [
    near(
        "MEDICAL_ID",
        compile_v1(
            r"(?<![A-Za-z0-9-])(?=[A-Za-z0-9-]*\d{3})[A-Za-z0-9][A-Za-z0-9-]{4,20}"
            r"(?<![-])(?![A-Za-z0-9])"
        ),
        0.6,
        context=_MEDICAL_CTX,
        window=24,
        after=12,
    ),
]

# the words for a password, a token or a key: 비밀번호, 비번, token, api key, 인증키
_SECRET_CTX = "(?i:" + alternatives("korean_net_ids_secret_words") + ")"
# what may come between the word and the value: "비밀번호는", "토큰 값"
_SECRET_PARTICLES = alternatives("korean_net_ids_secret_particles")
SECRET_SPECS = [
    near(
        "SECRET",
        compile_v1(
            rf"{_SECRET_CTX}(?:\s?(?i:키|key))?(?:\s?(?:{_SECRET_PARTICLES}))?[\"']?\s*"
            r"(?:[:=：]|->|→|is)?\s*"
            r"[\"'“‘`]?(?P<v>[^\s\"'”’`,\p{Hangul}]{4,120})"
        ),
        0.7,
        valid=_secretish,
    ),
    near(  # a quoted token a little after the word "password"
        "SECRET",
        compile_v1(r"[\"'“‘`](?P<v>[^\s\"'”’`\p{Hangul}]{6,120})[\"'”’`]"),
        0.6,
        context=compile_v1(_SECRET_CTX),
        window=30,
        valid=_secretish,
    ),
    near(  # a password typed a little after the word, without quotes ("비번 ... happy0915")
        "SECRET",
        compile_v1(
            r"(?<![\w@./:-])(?=[A-Za-z0-9!@#$%^&*_-]*\d)(?=[A-Za-z0-9!@#$%^&*_-]*[A-Za-z])"
            r"[A-Za-z0-9!@#$%^&*_-]{6,64}(?![\w@./:-])"
        ),
        0.5,
        context=compile_v1(_SECRET_CTX),
        window=30,
    ),
    near(  # well-known key shapes, anywhere
        "SECRET",
        compile_v1(
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
