"""Korean person names: kiwipiepy's morphology and proper nouns corroborated by what surrounds
them (a particle, vocative or title after, an introduction or form label before, a common
given-name shape or Faker's ``ko_KR`` given names), given names alone (``지수야``,
``민준이가``, ``서연 씨``), names in tool results (:mod:`tasks.pii.korean.name_fields`),
romanised names (:mod:`tasks.pii.korean.romanised`), and propagation: a name found once is
replaced everywhere in the text, its given name alone (``김민지 ... 민지 님``) and its
surname before a title (``김 과장님``) included.

Kiwi tags unknown words NNP too (``배송지``) and a surname syllable starts thousands of words
(``고객``): every kiwi hit needs a cue or a given-name-shaped body."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import regex as re

from tasks.pii.korean.name_fields import field_spans, spaced_spans
from tasks.pii.korean.name_lists import (
    GIVEN,
    KIN,
    ROLE_WORDS,
    SURNAMES,
    TITLES,
    faker_given_names,
    place_words,
    surname_split,
)
from tasks.pii.korean.romanised import latin_parts, romanised_spans
from tasks.pii.lexicon import alternatives, word_list

Tokenize = Callable[[str], list[Any]]
_WORD = re.compile(r"[가-힣]+")
_ROAD_AHEAD = re.compile(r"\s?\d")
_COPULAS = alternatives("korean_names_copulas")  # 이라고, 입니다, 이에요, 맞
# the syllables that make a title the start of another word (씨앗, 형태, 양말)
_NOT_AFTER_TITLE = alternatives("korean_names_not_after_title")
# the word after a name: a title, 께서/명의/앞으로, a sign-off, a relative ("진아 엄마"), a
# copula or the person's e-mail in brackets ("양지수(jisu@...)")
_NEXT_CUE = re.compile(
    rf"\s?(?:{TITLES}|{KIN}|{_COPULAS})(?!{_NOT_AFTER_TITLE})|\s?[(<]\s?[\w.+-]+@"
)
_HONORIFIC = re.compile(rf"\s?(?:{TITLES})(?!{_NOT_AFTER_TITLE})")
# endings glued to a name; the first group says "a person" on its own, the second is any noun's
_NAME_ENDINGS = list(word_list("korean_names_glued_endings")) + [
    t + p for t in ("님", "씨") for p in word_list("korean_names_name_endings")
]
_FAMILIAR = word_list("korean_names_familiar")
_ANY_ENDINGS = list(word_list("korean_names_any_endings"))
_ENDINGS = sorted({*_NAME_ENDINGS, *_ANY_ENDINGS}, key=len, reverse=True)
_PLACE_END = word_list("korean_names_place_end")
# the word before a name: a self-introduction, a form label or a mail header (저는, 예금주, To)
_BEFORE_CUE = re.compile("(?:" + alternatives("korean_names_before_cues") + r")\s*[:：]?\s*[\"']?$")
_INTRO = re.compile(r"(?<![가-힣])(?:저는|제\s?이름은|이름은|성함은)\s*[:：]?\s*$")  # "저는 ..."
# a relative before the name: "아들 송지환 계정", "딸 서윤이가"
_KIN_BEFORE = re.compile(r"(?<![가-힣])(?:" + alternatives("korean_names_kin_before") + r")\s$")
# a predicate or adverb right after a bare given name ("윤호 찾으시는데", "시우 오늘 조퇴")
_AFTER_BARE = ("VV", "VA", "MAG", "VCP")


def _given_shaped(word: str) -> bool:
    return len(word) >= 2 and all(c in GIVEN for c in word[-2:])


def given_like(stem: str) -> bool:
    """Whether ``stem`` is one of Faker's given names or two given-name syllables."""
    return stem in faker_given_names() or (len(stem) == 2 and _given_shaped(stem))


def _full_name_shape(stem: str) -> bool:
    split = surname_split(stem)
    if split is None:
        return False
    _surname, given = split
    return given_like(given) or (len(given) == 1 and len(stem) == 3 and stem[:2] != given)


def _cued(text: str, start: int, end: int) -> bool:
    before = text[max(0, start - 16) : start]
    return bool(
        _NEXT_CUE.match(text, end) or _BEFORE_CUE.search(before) or _KIN_BEFORE.search(before)
    )


@lru_cache(maxsize=4096)
def _stems(word: str, cued: bool = False) -> tuple[tuple[str, str], ...]:
    """The ``(stem, ending)`` readings of a Hangul word worth asking kiwi about, longest
    ending first (a place name only ``cued`` and full-name shaped: "저는 조지아입니다")."""
    out = [(word, "")]
    for ending in _ENDINGS:
        if word.endswith(ending) and 2 <= len(word) - len(ending) <= 4:
            out.append((word[: -len(ending)], ending))
    places = place_words()
    return tuple(
        (stem, ending)
        for stem, ending in out
        if 2 <= len(stem) <= 4
        and (stem not in places or (cued and _full_name_shape(stem)))
        and (
            _full_name_shape(stem)
            or given_like(stem)
            or (len(stem) == 3 and stem[0] in SURNAMES)
            or (len(stem) == 2 and ending in _NAME_ENDINGS)
        )
    )


class _Kiwi:
    """What kiwi's tokens say about the stretch ``[start, end)`` of the text."""

    def __init__(self, tokens: list[Any]) -> None:
        self.tokens = tokens

    def common(self, start: int, end: int) -> bool:
        """One ordinary-word token spans the stretch (``이슬``, ``날씨`` over ``날``)."""
        return any(
            t.start <= start and t.start + t.len >= end and t.tag not in ("NNP", "XSN", "SW")
            for t in self.tokens
        )

    def longer(self, start: int, end: int) -> bool:
        """An ordinary word starts at the stretch and runs past it (``날씨`` for ``날``)."""
        return any(
            t.start <= start and t.start + t.len > end and t.tag.startswith(("NN", "V", "M"))
            for t in self.tokens
        )

    def predicate(self, start: int, end: int, *, lead: bool = True) -> bool:
        """The stretch is a verb or adjective (``소중한``: 소중/XR 하/XSA ㄴ/ETM, ``고마워``:
        고맙/VA-I 어/EC; ``lead``: a verb at its start counts), not a surname and a given
        name. A lone connective ending inside is not enough: kiwi cuts unknown names that
        way (``류하람``: 류하/NNG 람/EC)."""
        return any(
            (lead and t.start == start and t.tag.startswith(("VV", "VA", "VX")))
            or (start < t.start < end and t.tag.startswith(("ETM", "EF", "EP", "XSA", "XSV")))
            for t in self.tokens
        )

    def proper(self, start: int, end: int | None = None) -> bool:
        """kiwi reads a proper noun starting at ``start`` (and ending at ``end``, if given)."""
        return any(
            t.start == start and t.tag == "NNP" and (end is None or t.start + t.len == end)
            for t in self.tokens
        )

    def compound(self, start: int) -> bool:
        """An ordinary noun of two syllables or more starts at ``start`` (``배송``기사)."""
        return any(t.start == start and t.tag in ("NNG", "NNB") and t.len >= 2 for t in self.tokens)

    def bound_noun_before_title(self, end: int) -> bool:
        """The stretch ending at ``end`` ends in a bound noun (``지``, ``수``) and 님 or 씨
        follows: kiwi's reading of a name as a verb, an ending and a bound noun (``남은지``
        as 남/VV 은/ETM 지/NNB), since no bound noun takes an honorific."""
        last = any(t.tag == "NNB" and t.start + t.len == end for t in self.tokens)
        return last and any(
            t.start in (end, end + 1) and t.form in ("님", "씨") for t in self.tokens
        )

    def modifier_misreading(self, start: int, end: int) -> bool:
        """kiwi reads the one written word ``start:end`` as a verb, its modifier ending and a
        one-syllable noun (``남은서``: 남/VV 은/ETM 서/NNG; ``안선영``: 안/MAG first). Korean
        spaces a modifier from its noun (``남은 서류``): glued, after a strong cue, a name."""
        inside = [t for t in self.tokens if start <= t.start < end]
        inside = inside[1:] if len(inside) == 4 and inside[0].len == 1 else inside
        return (
            len(inside) == 3
            and inside[0].tag.startswith(("VV", "VA"))
            and inside[1].tag == "ETM"
            and inside[2].tag.startswith("NN")
            and inside[2].len == 1
            and inside[2].start + inside[2].len == end
        )

    def tag_at(self, pos: int) -> str:
        """The tag of the token starting at ``pos`` (empty when none)."""
        return next((t.tag for t in self.tokens if t.start == pos), "")

    def next_tag(self, end: int) -> str:
        """The tag of the first token at or after ``end``."""
        return next((t.tag for t in self.tokens if t.start >= end), "")

    def role(self, start: int, end: int) -> bool:
        """The stretch ends in a role suffix (``구매자``, ``간호사``): a noun for a role."""
        return any(
            t.tag == "XSN" and t.start + t.len == end and t.start > start for t in self.tokens
        )


def _word_name(text: str, kiwi: _Kiwi, start: int, word: str, intro: bool) -> int:
    """How many leading characters of the Hangul ``word`` at ``start`` are a name (0: none;
    ``intro``: a self-introduction or a name label right before it)."""
    readings = _stems(word, intro) or ((word, ""),)  # "이슬 씨": _kiwi_spans let it through
    for stem, ending in readings:
        end = start + len(stem)
        vocative = kiwi.tag_at(end) == "JKV"
        strong = ending in _NAME_ENDINGS or vocative or _cued(text, start, end + len(ending))
        familiar = _familiar(stem, ending)
        known = kiwi.common(start, end) and not familiar
        if len(stem) >= 3 and _full_name(
            text, kiwi, start, stem, ending, strong=strong, known=known
        ):
            return len(stem)
        if (
            len(stem) == 2
            and stem[0] != stem[1]
            and stem not in ROLE_WORDS
            and _given_alone(text, kiwi, start, stem, ending, strong=strong, known=known)
        ):
            return 2
    return 0


def _full_name(
    text: str, kiwi: _Kiwi, start: int, stem: str, ending: str, *, strong: bool, known: bool
) -> bool:
    end = start + len(stem)
    proper = kiwi.proper(start)
    if _full_name_shape(stem):
        plain = proper and not known and not stem.endswith(_PLACE_END)
        # "소중한 고객님": an adjective kiwi reads, not a surname and a given name
        # (a verb kiwi reads at the start is its misreading: 한승우 as 하/VV ㄴ/ETM 승우)
        # (and a verb, its modifier ending and a noun glued into one word is a misreading
        # too: 남은서 as 남/VV 은/ETM 서/NNG)
        readable = not kiwi.predicate(start, end, lead=False)
        if strong and (proper or readable or kiwi.modifier_misreading(start, end)) or plain:
            return True
    # "조은비 님의", "김솔잎님이": a surname + two syllables right before an honorific, unless
    # kiwi reads an ordinary word, a compound ("배송기사님"), a role noun ("간호사님") or a
    # predicate ("고마워요 기사님")
    titled = ending[:1] in ("님", "씨", "께") or (not ending and bool(_HONORIFIC.match(text, end)))
    split = surname_split(stem)
    if not titled or split is None or len(split[1]) != 2 or kiwi.role(start, end):
        return False
    listed = split[1] in faker_given_names()
    if kiwi.bound_noun_before_title(end) or (listed and (not known or ending[:1] in ("님", "씨"))):
        # kiwi reads some names before a title as a verb, an ending and a noun ("남은지님":
        # 남/VV 은/ETM 지/NNB; "손수빈 고객님": 손수/MAG 비/VA ㄴ/ETM): a bound noun takes no
        # 님, and a listed given name after a surname before a title is a person; glued to
        # 님 or 씨 even where kiwi guesses a word ("조은비님," as 조은비/NNG, "구성진님" as
        # 구성지/VA ㄴ/ETM: no adjective's modifier takes 님)
        return True
    if known or kiwi.predicate(start, end) or kiwi.compound(start):
        return False
    return kiwi.proper(start, end) or not kiwi.longer(start, end)


def _given_alone(
    text: str, kiwi: _Kiwi, start: int, stem: str, ending: str, *, strong: bool, known: bool
) -> bool:
    end = start + len(stem)
    proper = kiwi.proper(start)
    shaped = given_like(stem)
    if not known:
        faker = stem in faker_given_names()
        if (shaped or proper) and strong:
            return True
        if (proper or faker) and (shaped or strong) and ending and _particle_after(kiwi, end):
            return True  # "다솜이한테", "시우랑": a proper noun or a listed name, a particle
        if not ending and shaped and (proper or faker):
            return _bare_name(text, kiwi, end, listed=faker)
        return False
    # a word kiwi knows that a person is called by all the same: "서진아" (vocative),
    # "이슬 씨가" (the word, a space, 씨), "정국이가" (the familiar 이 no common noun takes)
    if kiwi.longer(start, end):
        return False
    vocative = kiwi.tag_at(end) == "JKV"
    spaced_ssi = not ending and text.startswith(" 씨", end) and kiwi.tag_at(end + 1) == "NNB"
    familiar = ending in _FAMILIAR and _familiar(stem, ending)
    return (
        (shaped or proper) and (vocative or familiar) or (spaced_ssi and not kiwi.role(start, end))
    )


def _bare_name(text: str, kiwi: _Kiwi, end: int, *, listed: bool) -> bool:
    """A given name with nothing glued to it: only right before a predicate or an adverb
    (``윤호 찾으시는데``, ``시우 오늘 조퇴``), where a place or a shop's name would take a
    particle or a noun (``양재 매장``, ``준호 반점``); a listed (Faker) name also at the end
    of a clause (``수고하세요~ 재원``)."""
    if end < len(text) and not (text[end].isspace() or text[end] in ",.!?~"):
        return False
    if listed and re.match(r"\s*(?:[,.!?~]|$)", text[end:]):
        return True
    return kiwi.next_tag(end) in _AFTER_BARE


def _particle_after(kiwi: _Kiwi, end: int) -> bool:
    return any(
        t.start == end and (t.tag.startswith("J") or (t.tag == "XSN" and t.form == "이"))
        for t in kiwi.tokens
    )


def _familiar(stem: str, ending: str) -> bool:
    """``정국이가``: the familiar -이 between a consonant-final given name and its particle,
    which no common noun takes (``사람이가`` is not Korean), even one kiwi knows as a word."""
    return ending in _FAMILIAR and (ord(stem[-1]) - 0xAC00) % 28 != 0


def _kiwi_spans(text: str, tokenize: Tokenize) -> list[tuple[int, int]]:
    """Names among the Hangul words (kiwi runs only on texts with a candidate word)."""
    words = []
    for m in _WORD.finditer(text):
        w, intro = m.group(0), bool(_INTRO.search(text, max(0, m.start() - 12), m.start()))
        if _ROAD_AHEAD.match(text, m.end()) and w.endswith(("로", "길")):
            continue  # "공항대로 247" is a street, not a name before 로
        if _stems(w, intro) or (len(w) in (2, 3) and text.startswith(" 씨", m.end())):
            words.append((m.start(), w, intro))
    if not words:
        return []
    tokens = tokenize(text)
    starts = [t.start for t in tokens]
    spans = []
    for start, word, intro in words:
        near = tokens[bisect_left(starts, start) : bisect_right(starts, start + len(word) + 2)]
        n = _word_name(text, _Kiwi(near), start, word, intro)
        if n:
            spans.append((start, start + n))
    return spans


def _common_word(tokenize: Tokenize) -> Callable[[str], bool]:
    def common(value: str) -> bool:
        tokens = tokenize(value)
        return len(tokens) == 1 and tokens[0].tag not in ("NNP", "SL", "SH")

    return common


def korean_name_spans(text: str, tokenize: Tokenize) -> list[tuple[int, int]]:
    """Spans of Korean names in ``text`` (``tokenize`` is kiwipiepy's ``Kiwi.tokenize``)."""
    found = _kiwi_spans(text, tokenize) + field_spans(text, _common_word(tokenize))
    found += spaced_spans(text, lambda s, e: _spaced_cued(text, s, e))
    found += romanised_spans(text)
    spans = sorted(set(found + _propagated(text, found)))
    return [
        (s, e) for s, e in spans if not any(o != (s, e) and o[0] <= s and e <= o[1] for o in spans)
    ]  # a span inside a longer one ("Gil" of "Gil-dong Hong") is the same name


def _spaced_cued(text: str, start: int, end: int) -> bool:
    given = text[start:end].split(" ", 1)[1].replace(" ", "")
    before = _BEFORE_CUE.search(text[max(0, start - 16) : start])
    return bool(_NEXT_CUE.match(text, end) or (before and _given_shaped(given)))


def _propagated(text: str, found: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Every other place of a name found once: the full name, its given name alone (two
    syllables or more, before a particle or title) and its surname before a title; a
    romanised name's parts of three letters or more."""
    hangul: set[str] = set()
    surnames: set[str] = set()
    latin: set[str] = set()
    for s, e in found:
        value = text[s:e]
        compact = value.replace(" ", "")
        if re.fullmatch(r"[가-힣]{2,5}", compact):
            hangul.add(compact)
            split = surname_split(compact)
            if split:
                surnames.add(split[0])
                if len(split[1]) >= 2:
                    hangul.add(split[1])
        elif re.search(r"[A-Za-z]", value):
            latin.update(latin_parts(value))
    if not (hangul or latin):
        return []
    ends = "|".join(_ENDINGS)
    spans = []
    for name in hangul:
        # the name, and a given name found alone with its surname ("지환이가 ... 송지환")
        surname = rf"(?:{SURNAMES})?" if len(name) == 2 else ""
        pattern = rf"(?<![가-힣]){surname}{re.escape(name)}(?=(?:{ends})?(?![가-힣]))"
        spans += [m.span() for m in re.finditer(pattern, text)]
    for surname in surnames:
        pattern = rf"(?<![가-힣]){surname}(?=\s?(?:{TITLES}))"
        spans += [m.span() for m in re.finditer(pattern, text)]
    for part in latin:
        flags = re.IGNORECASE if len(part) > 3 else 0
        spans += [
            m.span()
            for m in re.finditer(rf"(?<![A-Za-z]){re.escape(part)}(?![A-Za-z])", text, flags)
        ]
    return spans
