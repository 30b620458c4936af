"""Romanised Korean names inside Korean text (``HONG GILDONG``, ``Gil-dong Hong``,
``park jisoo``, ``KIM/MINSEO``) and Latin-script names after a Korean label or
self-introduction (``성명 Nguyen Van An``, ``저 Jenny 인데요``).

A romanised name is a known surname next to one or two romanised syllables; the casing must
look like a name (title case, all capitals, or all lower case with a surname that is rarely an
English word) and the given part must not be an ordinary word (``Shin Ramyun`` is noodles).
"""

from __future__ import annotations

from typing import Any

import regex as re

from tasks.pii.lexicon import alternatives, word_list

_ROMAN_SURNAMES = "|".join(word_list("korean_romanised_surnames"))
# a romanised syllable: an optional initial consonant, a vowel and an optional final one
_SYL = (
    f"(?:{alternatives('korean_romanised_onsets')})?"
    f"(?:{alternatives('korean_romanised_vowels')})"
    f"(?:{alternatives('korean_romanised_finals')})?"
)
_GIVEN_ROMAN = rf"{_SYL}(?:[- ]?{_SYL})?"
_ROMAN = re.compile(
    rf"(?<![A-Za-z])(?:(?P<s1>{_ROMAN_SURNAMES})(?:,?\s+|/)(?P<g1>{_GIVEN_ROMAN})"
    rf"|(?P<g2>{_GIVEN_ROMAN})\s+(?P<s2>{_ROMAN_SURNAMES}))(?![A-Za-z])",
    re.IGNORECASE,
)
_NOT_GIVEN = set(word_list("korean_romanised_not_given"))
_LABELS = alternatives("korean_romanised_labels")  # 성명, 이름, 예금주
_LATIN_LABELLED = re.compile(
    f"(?:{_LABELS})"
    + r"(?:\([^)]{0,10}\))?\s*[:：]?\s*(\p{Lu}\p{Ll}+(?:[ -]\p{Lu}\p{Ll}+){0,3})(?![\p{L}])"
)
# "통역은 Nguyen Thi Lan 씨가": a Latin-script name before a Korean title
_LATIN_TITLED = re.compile(
    r"(?<![\p{L}])(\p{Lu}\p{Ll}+(?: \p{Lu}\p{Ll}+){1,3})(?=\s?(?:씨|님|고객님|선생님|여사님))"
)
_INTRO_ENDINGS = alternatives("korean_romanised_intro_endings")  # 인데, 입니다, 이라고
_LATIN_INTRO = re.compile(
    r"(?:저는?|나는?|제\s?이름은|이름은)\s+(\p{Lu}\p{Ll}{1,15}(?:\s\p{Lu}\p{Ll}{1,15})?)"
    + rf"(?=\s?(?:{_INTRO_ENDINGS}))"
)


def romanised_spans(text: str) -> list[tuple[int, int]]:
    """Romanised Korean names and labelled or introduced Latin-script names in ``text``."""
    spans = [m.span(1) for m in _LATIN_LABELLED.finditer(text)]
    spans += [m.span(1) for m in _LATIN_INTRO.finditer(text)]
    spans += [m.span(1) for m in _LATIN_TITLED.finditer(text)]
    for m in _ROMAN.finditer(text):
        spans.extend(_roman_span(m))
    return spans


def _roman_span(m: Any) -> list[tuple[int, int]]:
    given = (m.group("g1") or m.group("g2")).lower()
    if given.replace("-", "").replace(" ", "") in _NOT_GIVEN or given.split(" ")[0] in _NOT_GIVEN:
        return []
    value = m.group(0)
    letters = [c for c in value if c.isalpha()]
    words = re.split(r"[\s,/]+", value)
    upper = all(c.isupper() for c in letters)
    lower = all(c.islower() for c in letters)
    title = all(w[:1].isupper() for w in words if w)
    short = len(m.group("s1") or m.group("s2")) < 3
    if upper or title or (lower and not short):
        return [(m.start(), m.end())]
    return []


def latin_parts(value: str) -> list[str]:
    """The words of a romanised name worth finding alone elsewhere in the same text: each
    part of three letters or more (``Jiho`` of ``Kim Jiho``; not ``Oh``, an interjection)."""
    return [w for w in re.split(r"[\s,/]+", value) if len(w) >= 3 and w.lower() not in _NOT_GIVEN]
