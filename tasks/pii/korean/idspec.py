"""The machinery of :mod:`tasks.pii.korean.ids`: an identifier is an :class:`IdSpec` (a value
regex, the context words that must come shortly before or after it, the order/tracking words
that veto it, a validator) and :func:`match_specs` finds every spec's values in a text.

Patterns never use ``\\b``: Hangul is a word character, so ``192.168.0.1에서`` or
``국민은행123-45-678901`` has no word boundary at the digits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import regex as re

HY = r"[-‐‑‒–—―−﹘﹣－]"  # every dash people (and word processors) type; NFKC folds only some
SEP = rf"(?:\s*(?:{HY}|\.|·|_)\s*|\s+)"
GAP = rf"(?:\s?{HY}\s?|\s|\.)"  # one separator between digit groups
PROVINCES = "서울|부산|대구|인천|광주|대전|울산|세종|경기|강원|충북|충남|전북|전남|경북|경남|제주"
_VETO_WINDOW = 16
_FOLD = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}


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


def compile_v1(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``pattern`` compiled with the ``regex`` module's version-1 syntax (set operations)."""
    return re.compile(pattern, flags | re.V1)


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


def match_specs(text: str, specs: tuple[IdSpec, ...]) -> list[tuple[int, int, str, float]]:
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
