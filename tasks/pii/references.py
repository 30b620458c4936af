"""Numbers that are references, not people: order, tracking, invoice and part numbers read
as phone or card numbers, and dates read as phone numbers.

A phone or card finding is dropped when an order/tracking/reference word stands
right before it (only fillers such as "number is" between), when it is written like a date
(``03.04.2025``), or when it has the exact shape of a number dropped so in the same text
("part no. 1500-2231-88 replaced by 1500-2231-90"). Values under record keys such as ``sku``,
``order_id`` or ``tracking_number`` are references too (see :func:`reference_key`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import regex as re

from tasks.pii.fields import norm_key

if TYPE_CHECKING:
    from presidio_analyzer import RecognizerResult

# account numbers are left alone: "Ref 123-45-678901" may well be one (the account rules
# have their own cue words), and so are the user's custom patterns (settings)
NUMBER_TYPES = frozenset({"PHONE_NUMBER", "CREDIT_CARD"})
_WORDS = (
    r"order|orders|tracking|track|trk|invoice|inv|ticket|ref|reference|confirmation|conf|"
    r"booking|parcel|shipment|package|consignment|waybill|awb|part|sku|model|serial|item|"
    r"claim|receipt|transaction|txn|pnr|version|build|firmware|batch|rma"
)
_BEFORE = re.compile(
    rf"(?i)(?<![a-z])(?:{_WORDS})(?![a-z])"
    r"(?:[\s:#.-]*(?:no|nr|num|number|numbers|id|ref|code|is|was|reads|says|=|:|#))*[\s:#.=-]*$"
)
_DATE = re.compile(r"^\d{1,2}[./-]\d{1,2}[./-](?:\d{4}|\d{2})$|^\d{4}[./-]\d{1,2}[./-]\d{1,2}$")
_KEY = re.compile(
    rf"(?:[a-z0-9_]+_)?(?:{_WORDS}|tracking_number|po|sku_code|upc|ean|isbn|asin|gtin)"
    r"(?:_(?:id|no|nr|num|number|ref|code|key))?"
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
    kept = []
    for r in findings:
        if r.entity_type not in NUMBER_TYPES:
            kept.append(r)
            continue
        value = text[r.start : r.end]
        inside = any(s <= r.start and r.end <= e for s, e in protected)
        date = r.entity_type == "PHONE_NUMBER" and _DATE.match(value)
        if inside or date or _BEFORE.search(text[max(0, r.start - 40) : r.start]):
            dropped.add(_shape(value))
            continue
        kept.append(r)
    return [
        r
        for r in kept
        if r.entity_type not in NUMBER_TYPES or _shape(text[r.start : r.end]) not in dropped
    ]
