"""The one context-rule engine: an identifier that has a shape but no checksum is taken only
where the words around it say what it is.

A :class:`ContextRule` is a value regex, the cue words that must be near it, the words that
veto it, a validator and a score. It reads a text one of two ways:

- **cue first** (``fillers`` set; the English rules of :mod:`tasks.pii.generic.identifiers`):
  the value starts at most ``window`` characters after a cue ("passport", "DOB", "member id")
  and the words in between are fillers ("number is", "no.", ``": "``), never an order,
  tracking or booking word; or, with ``ends``, a clause about whose it is ending in "is"/":"
  ("the licence on file for my husband is ..."). Values listed after one cue all count.
- **value first** (``fillers`` ``None``; the Korean rules of :mod:`tasks.pii.korean.ids`): each
  value match counts when a cue comes within ``window`` characters before it (or ``after``
  characters after it), no ``veto`` word shortly before it in the same sentence, nothing of
  ``veto_after`` right after it; ``classify`` may name the entity from the value.

Cues never rely on ``\\b``: ``passport_no`` in JSON and ``여권번호는`` glued to a particle are
cues too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import regex as re

from tasks.pii.lexicon import word_list

# words that may stand between a cue and its value ("passport number is", "DOB: ")
FILLER = frozenset(word_list("identifiers_filler"))
# a value after these words is an order, ticket or product number, not a personal identifier
VETO = re.compile(
    r"(?i)(?<![a-z])(?:order|tracking|track|invoice|ticket|ref|reference|confirmation|booking|"
    r"flight|model|serial|sku|item|case|claim|receipt|transaction|pnr|parcel|shipment|"
    r"package|product|part|version|build|room|gate|seat|table|price|total|usd|eur|krw|won)"
    r"(?![a-z])"
)
_WORD = re.compile(r"[\p{L}\d']+")
_VETO_WINDOW = 16
_FOLD = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}


@dataclass(frozen=True, kw_only=True)
class ContextRule:
    """``entity`` wherever ``value`` matches (group ``v`` when present) with its context (see
    the module: cue first when ``fillers`` is set, value first otherwise)."""

    entity: str
    value: re.Pattern[str]
    cue: re.Pattern[str] | None = None
    valid: Callable[[str], bool] | None = None
    score: float = 0.6
    window: int = 32
    fillers: int | None = None  # cue first: words between cue and value not in FILLER
    topic: re.Pattern[str] | None = None  # the rule applies only to texts that mention it
    # cue first: the words between cue and value end with this ("... on file for Ann is");
    # then only the last few words before the value are checked for an order word
    ends: re.Pattern[str] | None = None
    veto: re.Pattern[str] | None = None  # value first: no such word shortly before
    veto_after: re.Pattern[str] | None = None  # value first: nothing of this right after
    after: int = 0  # value first: the cue may also follow within this many characters
    classify: Callable[[str, str], str] | None = None  # (value, text before) -> entity

    def spans(self, text: str) -> Iterator[tuple[int, int]]:
        """``(start, end)`` of the values this rule finds in ``text``."""
        for start, end, _entity, _score in self.find(text):
            yield start, end

    def find(self, text: str) -> list[tuple[int, int, str, float]]:
        """``(start, end, entity, score)`` of the values this rule finds in ``text``."""
        if self.topic is not None and not self.topic.search(text):
            return []
        if self.fillers is None:
            return list(self._value_first(text))
        assert self.cue is not None
        return [
            (start, end, self.entity, self.score)
            for cue in self.cue.finditer(text)
            for start, end in self._after(text, cue.end())
        ]

    def _ok(self, value: str) -> bool:
        return self.valid is None or self.valid(value)

    # cue first
    def _after(self, text: str, at: int) -> Iterator[tuple[int, int]]:
        last = None
        for m in self.value.finditer(text, at, min(len(text), at + self.window + 80)):
            if last is None:
                if m.start() - at > self.window or not self._gap_ok(text[at : m.start()]):
                    continue
            elif not re.fullmatch(r"\s*(?:,|/|&|and|or)\s*", text[last : m.start()]):
                return  # a list of values after one cue ("SSNs: 1..., 2...")
            if not self._ok(m.group(0)):
                if last is None:
                    continue
                return
            last = m.end()
            yield m.start(), m.end()
        return

    def _gap_ok(self, gap: str) -> bool:
        if self.ends is not None:
            if "\n" in gap or re.search(r"[.?!]\s", gap) or not self.ends.search(gap):
                return False
            return not VETO.search(gap[-25:])
        if VETO.search(gap) or "\n\n" in gap:
            return False
        odd = [w for w in _WORD.findall(gap.lower()) if w not in FILLER]
        return len(odd) <= (self.fillers or 0)

    # value first
    def _value_first(self, text: str) -> Iterator[tuple[int, int, str, float]]:
        if self.cue is not None and not self.cue.search(text):
            return  # the cheap test first: most texts mention no passport
        for m in self.value.finditer(text):
            group = "v" if "v" in self.value.groupindex else 0
            start, end = m.span(group)
            value = m.group(group)
            if self.cue is not None and not (
                _near(self.cue, text, start, self.window)
                or (self.after and self.cue.search(text, end, end + self.after))
            ):
                continue
            if _vetoed(self.veto, text, start) or (
                self.veto_after is not None and self.veto_after.match(text, end)
            ):
                continue
            if not self._ok(value):
                continue
            entity = self.classify(value, text[:start]) if self.classify else self.entity
            yield start, end, entity, self.score


def _near(pattern: re.Pattern[str], text: str, start: int, window: int) -> bool:
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


def match_rules(text: str, rules: tuple[ContextRule, ...]) -> list[tuple[int, int, str, float]]:
    """``(start, end, entity, score)`` of every rule's values in ``text`` (full-width folded)."""
    text = fold_width(text)
    return [found for rule in rules for found in rule.find(text)]
