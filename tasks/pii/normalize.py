"""Unicode normalisation before detection, with every offset mapped back to the original text.

People type identifiers with full-width digits (``９００１０１``), full-width or typographic
hyphens (``－``, ``–``, ``‐``), no-break and ideographic spaces, circled digits and zero-width
characters pasted from other apps. Recognisers see NFKC text with every dash folded to ``-``
and invisible characters dropped; the spans they report are mapped back onto the original
string, so the anonymiser replaces exactly what the user typed.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

# dashes NFKC leaves alone (hyphen, non-breaking hyphen, figure/en/em dash, minus, ...)
_DASHES = frozenset("\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u30fc\ufe58\ufe63\uff0d")
_INVISIBLE = frozenset("\u200b\u200c\u200d\u2060\ufeff\u00ad")
# typographic quotes (phones type "driver’s licence"): cue words are written with ASCII ones
_QUOTES = {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'}


@dataclass(frozen=True)
class Normalized:
    """A normalised text and, per character of it, the original span it came from
    (``None`` maps: the text was already normal)."""

    text: str
    starts: tuple[int, ...] | None = None
    ends: tuple[int, ...] | None = None

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that ``text[start:end]`` was made from."""
        if self.starts is None or self.ends is None or end <= start:
            return start, end
        return self.starts[start], self.ends[end - 1]


def _fold(char: str) -> str:
    if "\u3131" <= char <= "\u318e":
        # Hangul compatibility jamo (ㅋㅋ, ㅠㅠ, ㅎㅇ in chat) stay: NFKC turns them into
        # conjoining jamo, which glue onto the syllable before and break Korean tokenisation
        return char
    if char in _DASHES:
        return "-"
    if char in _INVISIBLE:
        return ""
    if char in _QUOTES:
        return _QUOTES[char]
    return unicodedata.normalize("NFKC", char)


def normalize(text: str) -> Normalized:
    """``text`` in NFKC with dashes folded to ``-`` and zero-width characters removed (per
    character, so offsets map back; ASCII and already-normal texts are returned as they are)."""
    if text.isascii() or (
        unicodedata.is_normalized("NFKC", text)
        and not any(c in _DASHES or c in _INVISIBLE or c in _QUOTES for c in text)
    ):
        return Normalized(text)
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for i, char in enumerate(text):
        folded = _fold(char)
        out.append(folded)
        starts.extend([i] * len(folded))
        ends.extend([i + 1] * len(folded))
    return Normalized("".join(out), tuple(starts), tuple(ends))
