"""Korean addresses: road addresses (``테헤란로 123``, ``올림픽로35길 12-3``) and lot addresses
(``역삼동 123-45번지``) with the city/district before them and the building detail after
(``, 101동 1203호``, ``3층``), and the apartment/officetel/villa form people give without a
street (``래미안아파트 101동 1203호``, ``롯데캐슬 3동 502호``, ``한빛빌라 202호``).

A city, province or district alone (``서울``, ``부산 해운대구``) is not an address and is
never reported: it identifies nobody and replacing it corrupts the training text.
"""

from __future__ import annotations

import regex as re

_H = r"\p{Hangul}"
_PROVINCE = (
    r"(?:서울|부산|대구|인천|광주|대전|울산|세종|경기|강원|충북|충남|전북|전남|경북|경남|제주|"
    r"충청북|충청남|전라북|전라남|경상북|경상남)"
)
_REGION = (
    rf"(?:(?:{_PROVINCE}(?:특별시|광역시|특별자치시|특별자치도|도|시)?"
    rf"|[{_H}]+(?:시|군|구|특별자치도|도))\s*){{0,5}}"
)
_NOT_AFTER = (
    r"(?![\d]|-\d|번(?!지|길)|개|명|일|분|원|회|월|년|차|시간|가지|%|등|km|m\b|가(?!\d)|세|만|천|억|시|"
    r"주|살|인치|kg|GB|대|장|권|병|잔|건|점|위|배|마리|곳|줄|초|편|부|기|개월|박)"
)
_ROAD = (
    rf"(?:[{_H}]{{2,}}|[{_H}\d]*[{_H}]\d+번?)(?:대로|(?<!으)로|길|(?<=\d|[{_H}]{{2}})(?<!번호|주소|코드)가)"
    rf"\s?(?:지하\s?)?\d{{1,5}}(?:-\d{{1,4}})?"
    rf"(?:번길\s?\d{{1,4}}(?:-\d{{1,4}})?)?{_NOT_AFTER}"
)
_LOT = rf"[{_H}]+(?:동|리|\d가)\s?\d{{1,5}}(?:-\d{{1,4}})?(?:번지)?{_NOT_AFTER}"
_COMPLEX_WORD = (
    rf"[{_H}A-Za-z0-9]*(?:아파트|오피스텔|빌라|빌|맨션|타운|하이츠|캐슬|자이|푸르지오|래미안|"
    rf"아이파크|힐스테이트|더샵|센트럴|팰리스|파크|타워|단지|마을|스위트|레지던스|편한세상|"
    rf"하우스|APT|apt|빌딩|주공|리버|시티|뷰|포레|에듀|스카이|엘스|리센츠|아크로|힐스|써밋|르엘|"
    rf"데시앙|포레나|꿈에그린|베르디움|스테이트|리첸시아|트리지움|빌리지|코아|프라자)"
)
_NOT_COMPLEX = r"(?:주소|우리집|집|배송지|집주소|주소지|새주소|현주소|거주지|여기|저희|우리)"
_UNIT = (
    rf"(?:[A-Za-z0-9]{{1,4}}\s?동(?:\s?\d{{1,3}}\s?층)?(?:\s?\d{{1,5}}\s?호)?(?![{_H}])"
    rf"|\d{{1,5}}\s?호|지하\s?\d층|\d{{1,3}}\s?층)"
)
# after a street address any building name may precede the unit ("에이치스퀘어 N동 8층")
_DETAIL = rf"(?:\s?,?\s?(?:[{_H}A-Za-z0-9]+\s){{0,2}}{_UNIT}){{0,2}}(?:\s?\([{_H}\d ,]+\))?"
ADDRESS_PATTERNS: tuple[tuple[str, float], ...] = (
    (rf"(?<![{_H}]){_REGION}(?:{_ROAD}|{_LOT}){_DETAIL}", 0.7),
    # a complex's name, then building and unit: no street needed
    (
        rf"(?<![{_H}A-Za-z0-9])(?:{_COMPLEX_WORD}\s?){{1,2}}[A-Za-z0-9]{{1,4}}\s?동\s?\d{{1,5}}\s?호",
        0.7,
    ),
    (rf"(?<![{_H}A-Za-z0-9])(?:{_COMPLEX_WORD}\s?){{1,2}}\d{{1,5}}\s?호(?!\d|선|실|점|기)", 0.6),
    # building and unit after any complex name ("잠실엘스 5동 1101호"), not after a particle
    (
        rf"(?<![{_H}A-Za-z0-9])(?:(?!{_NOT_COMPLEX}\s)[{_H}A-Za-z0-9]*[{_H}A-Za-z]"
        rf"(?<![는은이가를을에로도의요다고서])\s)?"
        r"(?<![\d])\d{1,4}\s?동\s?\d{1,5}\s?호(?!\d|선|실|점|기)",
        0.55,
    ),
    (r"(?<![\d-])\d{2,4}-\d{3,4}호", 0.5),  # "101-1203호"
)
_COMPILED = tuple((re.compile(p), s) for p, s in ADDRESS_PATTERNS)


def address_spans(text: str) -> list[tuple[int, int, float]]:
    """``(start, end, score)`` of every Korean address in ``text`` (trailing spaces trimmed)."""
    out = []
    for pattern, score in _COMPILED:
        for m in pattern.finditer(text):
            value = m.group(0).rstrip(" ,")
            if value:
                out.append((m.start(), m.start() + len(value), score))
    return out
