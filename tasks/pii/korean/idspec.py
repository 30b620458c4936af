"""The pieces of :mod:`tasks.pii.korean.ids`: separators and provinces as Korean text writes them,
and :func:`near`, a value-first rule of the one context-rule engine
(:class:`tasks.pii.context.ContextRule`: a value regex, the context words that must come shortly
before or after it, the order/tracking words that veto it, a validator).

Patterns never use ``\\b``: Hangul is a word character, so ``192.168.0.1에서`` or
``국민은행123-45-678901`` has no word boundary at the digits.
"""

from __future__ import annotations

from typing import Any

import regex as re

from tasks.pii.context import ContextRule
from tasks.pii.lexicon import alternatives

HY = r"[-‐‑‒–—―−﹘﹣－]"  # every dash people (and word processors) type; NFKC folds only some
SEP = rf"(?:\s*(?:{HY}|\.|·|_)\s*|\s+)"
GAP = rf"(?:\s?{HY}\s?|\s|\.)"  # one separator between digit groups
# the short names of the metropolitan cities and provinces (서울, 경기, 충북)
PROVINCES = alternatives("korean_idspec_provinces")


def near(
    entity: str,
    value: re.Pattern[str],
    score: float,
    *,
    context: re.Pattern[str] | None = None,
    window: int = 24,
    **more: Any,
) -> ContextRule:
    """A value-first :class:`~tasks.pii.context.ContextRule`: ``entity`` wherever ``value``
    matches, only after ``context`` (within ``window`` characters) when one is given."""
    return ContextRule(entity=entity, value=value, score=score, cue=context, window=window, **more)


def compile_v1(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``pattern`` compiled with the ``regex`` module's version-1 syntax (set operations)."""
    return re.compile(pattern, flags | re.V1)
