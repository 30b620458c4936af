"""The one context-rule engine: an identifier that has a shape but no checksum is taken only
where the words around it say what it is.

A :class:`ContextRule` is a value regex, the cue words that must be near it, the words that
veto it, a validator and a score. It reads a text one of two ways:

- **cue first** (``fillers`` set; the English rules of :mod:`tasks.pii.generic.identifiers`):
  the value starts at most ``window`` characters after a cue ("passport", "DOB", "member id")
  and the words in between are fillers ("number is", "no.", ``": "``), never an order,
  tracking or booking word; or, with ``ends``, a clause about whose it is ending in "is"/":"
  ("the licence on file for my husband is ..."). Values listed after one cue all count.
  Either way, where the value ends a clause naming it ("... is", ":"), the clause's subject
  decides first (:func:`tasks.pii.clauses.subject_head`): the word its head noun is about,
  the modifiers after a preposition only where the head is a bare "number": "the passport
  no. on the booking is X" is a passport (the booking only says where), "the booking number
  on my passport renewal is X" and "the number on the ticket is X" are not.
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
from functools import lru_cache

import regex as re

from tasks.pii.clauses import (
    FILLER,
    PREPOSITION_WORDS,
    SENTENCE_END,
    VETO,
    claimed_after,
    claimed_in,
    head_in,
    own_number,
    subject_span,
    vetoed,
    word_at,
)
from tasks.pii.lexicon import STOP_WORDS, words_pattern

_WORD = re.compile(r"[\p{L}\d']+")
# where a question ends (its answer may follow on the line or the next) or a turn does
_TURN = re.compile(r"\?[ \t]*(?:\n[ \t>]*){0,2}|(?:\n[ \t>]*){1,2}")
_ASKED_SPAN = 80  # characters of a question after its cue word
# a list item's mark: a bullet or a number ("- ", "2. ")
LIST_MARK = r"(?:[-*\u2022\u00b7]|\d{1,2}[.)])[ \t]+"
_LIST_MARK = re.compile(rf"(?m)^[ \t>]*{LIST_MARK}")
# whose the value is, written as its label after a colon or a line break ("Passport numbers:
# Ana Lima FZ1187342", "Maria Santos - CB123456"): up to three capitalised words
_LABEL = re.compile(
    r"(?:^|(?<=[:\n]))[ \t]*(?:\p{Lu}[\p{L}'\u2019-]*[ \t]+){1,3}[-\u2013\u2014:,]?[ \t]*$"
)
_DATE_SHAPE = re.compile(r"\d{1,4}[./-]\d{1,2}[./-]\d{1,4}$")  # an expiry after a list's value
_JOINERS = frozenset(["and", "or", "not", "maybe", "also"])  # between a list's values
_CAPITAL = re.compile(r"\p{Lu}")
_TOKEN = re.compile(r"[\p{L}\d]+")
_WRAP = re.compile(r"(?<=^[^\n]{60,})\n(?=\S)", re.M)  # where a mail client wrapped a line
_GROUP_BREAK = re.compile(r"[ -](?=\p{Lu}{2})")  # where a value's groups run into a label
_GROUP = re.compile(r"[ -]")  # where any of a value's groups ends
# a group that is a number with its unit ("1200ms", "35x45mm", "2.4MB"): it measures something,
# and neither it nor what follows is part of an identifier
_MEASURE = re.compile(
    rf"(?i)(?:^|(?<=[ -]))\d+(?:[.,]\d+)?(?:x\d+(?:[.,]\d+)?)*"
    rf"(?:{words_pattern('measurement_units')})(?=[ -]|$)"
)
# a value's first group when it is a word: "NO K4471902", "NO-K4471902", but a single
# letter before a hyphen is the number's own ("A-1234567", not the article)
_HEAD_WORD = re.compile(r"(\p{L}+)(?: |(?<=\p{L}{2})-)")
_FOLD = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}


@lru_cache(maxsize=64)
def as_capitals(text: str) -> str:
    """``text`` with the codes of each line written without a capital letter in capitals, the
    same length: whoever types in lower case ("passport fz 118 7342", "ana lima, fz1187342,
    bra") writes a code's capitals in it too. A code here is a word with two digits or more,
    or of one to three letters that is no English word ("fz", "bra"; not "of", "and"); a word
    of letters with one digit ("tkrwqbm7z") is left: in lower case, ICAO's nine count only
    right after the document's word. Other lines are left as they are."""
    if not any(c.islower() for c in text):
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not _CAPITAL.search(line):
            lines[i] = _TOKEN.sub(_code_in_capitals, line)
    return "\n".join(lines)


@lru_cache(maxsize=64)
def _value_view(text: str) -> str:
    """What a cue-first rule's values are read in: :func:`as_capitals`, a mail client's wrap
    (a line break after 60 characters or more) read as a space; the same length."""
    return _WRAP.sub(" ", as_capitals(text))


def _code_in_capitals(m: re.Match[str]) -> str:
    word = m.group(0)
    digits = sum(c.isdigit() for c in word)
    code = digits >= 2 or (not digits and len(word) <= 3 and word not in STOP_WORDS)
    return "".join(u if len(u := c.upper()) == 1 else c for c in word) if code else word


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
    stop: re.Pattern[str] | None = None  # cue first: what ends a list of values (a cue)

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
            for start, end in self._after(text, cue)
        ]

    def _ok(self, value: str) -> bool:
        return self.valid is None or self.valid(value)

    # cue first
    def _after(self, text: str, cue: re.Match[str]) -> Iterator[tuple[int, int]]:
        at, last = cue.end(), None
        for m in self._values(text, at, len(text)):
            if last is None:
                if m.start() - at > self.window + _ASKED_SPAN:
                    return
                near = self._close_enough(text[at : m.start()])
                if not self._subject_ok(text, cue, m.start(), near=near):
                    continue
            elif not self._continues(text[last : m.start()]) or _DATE_SHAPE.match(m.group(0)):
                return  # a list of values after one cue ("SSNs: 1..., 2..."), no date in it
            end = self._valid_end(m)
            if end is None or claimed_after(text, end):
                if last is None:
                    continue
                return
            last = end
            yield m.start(), end
        return

    def _continues(self, between: str) -> bool:
        """The next value is of the same list: between the two, separators, list marks, a
        joining word ("and", "or", "not", "maybe"), at most one line break, one other
        lower-case word ("(mine) and") and three capitalised ones (whose it is: "Ana Lima
        FZ1187342, Jon Berg 31874592", "British ... and Irish ..."); no order word, no
        other rule's cue (``stop``), no sentence end."""
        bare = _LIST_MARK.sub("", between)
        if between.count("\n") > 1 or re.search(r"[.!?]\s", bare) or VETO.search(between):
            return False
        if self.stop is not None and self.stop.search(between):
            return False
        words = [w for w in _WORD.findall(bare) if w.lower() not in _JOINERS]
        named = [w for w in words if w[0].isupper() and w.lower() not in FILLER]
        odd = [w for w in words if not w[0].isupper() and w.lower() not in FILLER]
        return len(named) <= 3 and len(odd) <= 1

    def _valid_end(self, m: re.Match[str]) -> int | None:
        """Where the valid value that ``m`` starts ends: all of it, or its longest valid first
        groups where it runs on into the next field ("K4471902 DOB 09 FEB 1988") or into a
        measure ("548213307 200 12ms", a log line's fields: the first group where it is valid
        alone, else the longest valid groups before the measure); None when none is valid
        ("1200ms", "35 45mm")."""
        value, breaks = m.group(0), _GROUP_BREAK
        measure = _MEASURE.search(value)
        if measure is not None:
            value, breaks = value[: measure.start()].rstrip(" -"), _GROUP
            first = _GROUP.search(value)
            if first is not None and self._ok(value[: first.start()]):
                return m.start() + first.start()
        if value and self._ok(value):
            return m.start() + len(value)
        for cut in reversed([g.start() for g in breaks.finditer(value)]):
            if self._ok(value[:cut]):
                return m.start() + cut
        return None

    def _values(self, text: str, at: int, end: int) -> Iterator[re.Match[str]]:
        """The value's matches in ``text[at:end]``, read in capitals where the line is typed in
        lower case ("passport fz 118 7342") and where a mail client wrapped the line in the
        middle of it (a line break after 60 characters or more reads as a space); a filler
        word is no group of a value ("PASSPORT NO K4471902": the value starts after "NO"); an
        order word is no value's first group: it claims the value ("passport renewal (ref
        548213307)" typed in lower case reads "REF 548213307")."""
        view = _value_view(text)
        while m := self.value.search(view, at, end):
            head = _HEAD_WORD.match(m.group(0))
            if head and head.group(1).lower() in FILLER:
                at = m.start() + head.end()
                continue
            mark = _LIST_MARK.match(view, view.rfind("\n", 0, m.start()) + 1, m.end() + 2)
            if mark and m.start() < mark.end():
                at = m.end()  # "2. Tomas Novak, ...": a list's number
                continue
            if head and VETO.fullmatch(head.group(1)):
                return  # "ref 548213307": an order word's value, and what follows is too
            yield m
            at = max(m.end(), m.start() + 1)

    def _subject_ok(self, text: str, cue: re.Match[str], start: int, *, near: bool) -> bool:
        """The value at ``start`` is this cue's: the clause's subject is the cue (whatever
        modifies it, however long: "the number of my passport, which I renewed in March
        because ..., is"), or the value is ``near`` it, the subject is not an order or
        booking word and the words in between pass."""
        span = subject_span(text, start)
        head = None if span is None else head_in(text, span)
        if span is not None and head is not None and cue.start() <= head < cue.end():
            # "the passport no. on the booking is": the booking only says where (a form may
            # put the value on the line after its label: "Passport:\n..."); the clause may be
            # restated ("... is wrong. It should read")
            end = span[1] if span[1] < start - 1 else start
            return not re.search(SENTENCE_END, text[cue.end() : end].rstrip())
        if not near:
            return False
        if head is not None and (VETO.fullmatch(word_at(text, head)) or own_number(text, head)):
            return False  # "the booking number on my passport renewal is", "appointment number"
        return self._gap_ok(text[cue.end() : start])

    def _close_enough(self, gap: str) -> bool:
        """The value is close enough to its cue: within ``window``, or, where a question or
        a turn ends between them, the question's rest within :data:`_ASKED_SPAN` and the
        answer's words before the value within ``window``."""
        turn = _TURN.search(gap) if self.ends is None else None
        if turn is None:
            return len(gap) <= self.window
        return turn.start() <= _ASKED_SPAN and len(gap) - turn.end() <= self.window

    def _gap_ok(self, gap: str) -> bool:
        if self.ends is not None:
            if "\n" in gap or re.search(r"[.?!;]\s", gap) or not self.ends.search(gap):
                return False
            return not claimed_in(gap)
        turn = _TURN.search(gap)
        if turn is not None:
            return self._asked_ok(gap[: turn.start()], gap[turn.end() :])
        if VETO.search(gap):
            return False
        return len(_odd_words(_LABEL.sub("", gap))) <= (self.fillers or 0)

    def _asked_ok(self, asked: str, answer: str) -> bool:
        """A question or a turn names the cue, the next turn gives the value ("Can you
        confirm the passport number for the booking?\\nCustomer: 548213307"): the question's
        words after the cue say where only after a preposition (an order word before one
        claims the value: "the passport or the booking number?"), the answer's words before
        the value are fillers or a speaker's label; together no more odd words than
        ``fillers``. A sentence ending inside either part breaks the link."""
        answer = _LIST_MARK.sub("", answer)
        if re.search(r"[.!?]\s", asked) or re.search(r"[.!?]\s|\n", answer):
            return False
        head = re.split(rf"(?i)(?<![\p{{L}}])(?:{PREPOSITION_WORDS})(?![\p{{L}}])", asked)[0]
        if VETO.search(head) or VETO.search(answer):
            return False
        odd = _odd_words(head) + _odd_words(_LABEL.sub("", answer))
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
            if vetoed(self.veto, text, start) or (
                self.veto_after is not None and self.veto_after.match(text, end)
            ):
                continue
            if not self._ok(value):
                continue
            entity = self.classify(value, text[:start]) if self.classify else self.entity
            yield start, end, entity, self.score


def _odd_words(gap: str) -> list[str]:
    """The words of ``gap`` that are no filler."""
    return [w for w in _WORD.findall(gap.lower()) if w not in FILLER]


def _near(pattern: re.Pattern[str], text: str, start: int, window: int) -> bool:
    return pattern.search(text, max(0, start - window), start) is not None


def fold_width(text: str) -> str:
    """Full-width ASCII (``９００３０５－１``) and the ideographic space as their ASCII forms, one
    character for one, so offsets stay those of ``text`` (the engine may NFKC first; this keeps
    the recognisers right on text that did not go through it)."""
    return text.translate(_FOLD)


def match_rules(text: str, rules: tuple[ContextRule, ...]) -> list[tuple[int, int, str, float]]:
    """``(start, end, entity, score)`` of every rule's values in ``text`` (full-width folded)."""
    text = fold_width(text)
    return [found for rule in rules for found in rule.find(text)]
