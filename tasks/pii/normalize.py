"""Unicode normalisation before detection, with every offset mapped back to the original text.

People type identifiers with full-width digits (``９００１０１``), full-width or typographic
hyphens (``－``, ``–``, ``‐``), no-break and ideographic spaces, circled digits and zero-width
characters pasted from other apps. Recognisers see NFKC text with every dash folded to ``-``
and invisible characters dropped; the spans they report are mapped back onto the original
string, so the anonymiser replaces exactly what the user typed.

A document's word typed one letter off ("passprt", "passsport", "licnece", "drving") is read as
the word (:func:`_spelling`; the words in ``lexicon/typo_targets.txt``), so every cue, topic and
field key sees the document it names; the user's text keeps its typo.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import cache
from string import ascii_lowercase

import regex as re

from tasks.pii.lexicon import word_list

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
    """``text`` in NFKC with dashes folded to ``-``, zero-width characters removed and a
    document's word typed one letter off spelled right (offsets map back; a text with nothing
    to change is returned as it is)."""
    return _spelling(_unicode(text))


def _unicode(text: str) -> Normalized:
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


_WORD = re.compile(r"(?<![A-Za-z])[A-Za-z]{5,10}(?![A-Za-z])")


def _one_edit(word: str) -> set[str]:
    """Every string one letter dropped, added, replaced, or two neighbours swapped from ``word``."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    return {
        *(a + b[1:] for a, b in splits if b),
        *(a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1),
        *(a + c + b[1:] for a, b in splits if b for c in ascii_lowercase),
        *(a + c + b for a, b in splits for c in ascii_lowercase),
    }


@cache
def _typos() -> dict[str, str]:
    """Mistyped word -> the document word it is one edit from (real words left out)."""
    targets = word_list("typo_targets")
    keep = set(targets) | set(word_list("typo_real_words"))
    out: dict[str, str] = {}
    for target in targets:
        for typo in sorted(_one_edit(target) - keep):
            out.setdefault(typo, target)
    return out


def _cased(word: str, like: str) -> str:
    if like.isupper():
        return word.upper()
    return word.capitalize() if like[:1].isupper() else word


def _spelling(norm: Normalized) -> Normalized:
    """``norm`` with each mistyped document word replaced by the word, the replacement mapped
    to the typo's span."""
    typos = _typos()
    fixes = [
        (m.start(), m.end(), _cased(typos[m.group().lower()], m.group()))
        for m in _WORD.finditer(norm.text)
        if m.group().lower() in typos
    ]
    if not fixes:
        return norm
    text = norm.text
    starts = list(norm.starts) if norm.starts else list(range(len(text)))
    ends = list(norm.ends) if norm.ends else list(range(1, len(text) + 1))
    out: list[str] = []
    new_starts: list[int] = []
    new_ends: list[int] = []
    at = 0
    for start, end, word in [*fixes, (len(text), len(text), "")]:
        out.append(text[at:start])
        new_starts += starts[at:start]
        new_ends += ends[at:start]
        if word:
            out.append(word)
            new_starts += [starts[start]] * len(word)
            new_ends += [ends[end - 1]] * len(word)
        at = end
    return Normalized("".join(out), tuple(new_starts), tuple(new_ends))
