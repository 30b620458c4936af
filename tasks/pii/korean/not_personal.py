"""Numbers in Korean text that look like a phone, an account or an IP address and identify
nobody: companies' nationwide service lines (``1588-xxxx``, ``1670-xxxx``, ``1544-xxxx``: only
a business can hold one), toll-free ``080`` lines and any number right after the words that
name a company's line (``대표번호 02-1234-5678``, ``고객센터``), order, tracking and receipt numbers
written right beside the word that says so (``송장 567812349012``, ``2024061298765 주문 건``),
and version numbers (``v1.10.2.3``).

Every pipeline's findings pass :func:`not_personal` (the English one reads ``1577 1255`` as a
Korean phone through ``phonenumbers``), so the rule holds whichever recogniser fired.
"""

from __future__ import annotations

import regex as re

from tasks.pii.lexicon import alternatives

# 전국대표번호: 15xx, 16xx and 18xx, eight digits, assigned to businesses only; 080: toll-free
# (a country code only with its "+": "8216210432" is a ten-digit phone)
_SERVICE_LINE = re.compile(r"^(?:(?:\+82)?1[568]\d{6}|(?:\+82|0)80\d{7,8})$")
# the order, tracking, receipt and return words beside a number: 주문, 송장, 영수증, 반품
_ORDER_WORD = alternatives("korean_not_personal_order_words")
_ORDER_BEFORE = re.compile(
    rf"(?:{_ORDER_WORD})\s*(?:번호|no\.?|#)?\s*(?:는|은|가|이|:|：)?\s*$", re.IGNORECASE
)
# a company's line by the word before it: main number, customer/call/service centre
_CENTRES = alternatives("korean_not_personal_centres")  # 고객, 콜, 상담, A/S (센터)
_BUSINESS_BEFORE = re.compile(
    rf"(?:대표\s?(?:번호|전화)|(?:{_CENTRES})\s?센터|고객\s?상담실)"
    r"\s*(?:번호)?\s*(?:는|은|:|：)?\s*$",
    re.IGNORECASE,
)
_ORDER_AFTER = re.compile(rf"^\s*(?:번\s*)?(?:{_ORDER_WORD})")
_NUMBER_TYPES = ("PHONE_NUMBER", "BANK_ACCOUNT")
# "v1.10.2.3", "펌웨어 1.2.3.4 버전": a version, not an IPv4 address
_VERSION_BEFORE = re.compile(r"(?:(?<![A-Za-z])[vV]|버전|펌웨어|ver\.?)\s?$")
_VERSION_AFTER = re.compile(r"\s?(?:버전|ver(?![a-z]))")


def service_line(value: str) -> bool:
    """Whether a phone-shaped ``value`` is a company's service or toll-free line."""
    digits = re.sub(r"[^\d+]", "", value)
    return bool(_SERVICE_LINE.match(digits))


def not_personal(text: str, start: int, end: int, entity: str) -> bool:
    """Whether the finding ``text[start:end]`` of type ``entity`` is a service line, or an
    order/tracking number right beside the word that says so. A number starting with 0 or
    +82 stays a phone even after ``주문자`` (the orderer's phone is personal)."""
    if entity == "IP_ADDRESS":
        return bool(_VERSION_BEFORE.search(text, 0, start) or _VERSION_AFTER.match(text, end))
    if entity not in _NUMBER_TYPES:
        return False
    value = text[start:end]
    if service_line(value):
        return True
    if _BUSINESS_BEFORE.search(text[max(0, start - 20) : start]):
        return True
    if entity == "PHONE_NUMBER" and re.match(r"\s*(?:\+|0)", value):
        return False
    return bool(
        _ORDER_BEFORE.search(text[max(0, start - 20) : start]) or _ORDER_AFTER.match(text[end:])
    )
