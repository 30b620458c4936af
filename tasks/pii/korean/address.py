"""Korean addresses: road addresses (``테헤란로 123``, ``올림픽로35길 12-3``) and lot addresses
(``역삼동 123-45번지``) with the city/district before them and the building detail after
(``, 101동 1203호``, ``3층``), and the apartment/officetel/villa form people give without a
street (``래미안아파트 101동 1203호``, ``롯데캐슬 3동 502호``, ``한빛빌라 202호``).

A city, province or district alone (``서울``, ``부산 해운대구``) is not an address and is
never reported: it identifies nobody and replacing it corrupts the training text.
"""

from __future__ import annotations

import regex as re

from tasks.pii.lexicon import alternatives

_H = r"\p{Hangul}"
# the short names of the cities and provinces (서울, 충북), then the long ones less 도 (충청북)
_PROVINCE = (
    "(?:"
    + alternatives("korean_idspec_provinces")
    + "|"
    + alternatives("korean_address_province_stems")
    + ")"
)
_PROVINCE_SUFFIX = alternatives("korean_address_province_suffixes")  # 특별시, 광역시, 도
_REGION = (
    rf"(?:(?:{_PROVINCE}(?:{_PROVINCE_SUFFIX})?"
    rf"|[{_H}]+(?:시|군|구|특별자치도|도))\s*){{0,5}}"
)
# a unit or counter after the number: a quantity ("테헤란로 3개"), not an address
_NOT_AFTER = r"(?![\d]|-\d|" + alternatives("korean_address_not_after") + ")"
_ROAD = (
    rf"(?:[{_H}]{{2,}}|[{_H}\d]*[{_H}]\d+번?)(?:대로|(?<!으)로|길|(?<=\d|[{_H}]{{2}})(?<!번호|주소|코드)가)"
    rf"\s?(?:지하\s?)?\d{{1,5}}(?:-\d{{1,4}})?"
    rf"(?:번길\s?\d{{1,4}}(?:-\d{{1,4}})?)?{_NOT_AFTER}"
)
_LOT = rf"[{_H}]+(?:동|리|\d가)\s?\d{{1,5}}(?:-\d{{1,4}})?(?:번지)?{_NOT_AFTER}"
# the words and brands that end a complex's name (아파트, 빌라, 래미안), and the words before
# a building and unit number that are not one (주소, 우리집, 여기)
_COMPLEX_WORD = rf"[{_H}A-Za-z0-9]*(?:{alternatives('korean_address_complex_words')})"
_NOT_COMPLEX = "(?:" + alternatives("korean_address_not_complex") + ")"
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
