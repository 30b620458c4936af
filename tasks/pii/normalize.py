"""Unicode normalisation before detection, with every offset mapped back to the original text.

People type identifiers with full-width digits (``９００１０１``), full-width or typographic
hyphens (``－``, ``–``, ``‐``), no-break and ideographic spaces, circled digits and zero-width
characters pasted from other apps. Recognisers see NFKC text with every dash folded to ``-``
and invisible characters dropped; the spans they report are mapped back onto the original
string, so the anonymiser replaces exactly what the user typed.

A document's word typed one letter off ("passprt", "passsport", "licnece", "drving") is read as
the word (:func:`_spelling`; the words in ``lexicon/typo_targets.txt``), so every cue, topic and
field key sees the document it names; the user's text keeps its typo.

A URL's escapes are read as what they encode (:func:`_url_decoded`): in a token that holds a
``?``, ``=`` or ``/``, ``%40`` is ``@``, ``%20`` a space, ``%EA%B9%80`` 김, and a ``+`` between
letters in a value after ``=`` a space, so ``?email=anna.weber%40example.com`` and ``?name=Tom+Berg`` are read as the
address and the name a tool's log line or a redirect carries.

A document's number in a file's name, a path or a slug ("scan_passport_548213307.jpg",
"Passport561190284.pdf", "/kyc/passport-C01X00T47-front.png") is read with spaces around it
(:func:`_file_names`): the marks between the document's word (``lexicon/typo_targets.txt``),
two words at most after it, and the first part with a digit, and the mark after that part,
are read as spaces, so the rules that read "passport 548213307" read it; a key without a
digit after the word ("passport_number") stays as written.

A number read aloud and written out by speech-to-text ("oh seven seven double oh nine oh oh one
two three", "four five three nine, one four eight eight, ...") is read as its digits
(:func:`_spoken`; the words in ``lexicon/spoken_digits.txt``, "double" and "triple" repeating
the next, a capital letter read out inside it kept): a run of at least seven characters with
at least three digits spelled out, a comma or dash between groups kept as ``-``, so every
number recogniser sees the phone, card, passport or social security number it is. Shorter
runs ("press one for billing", "four oh four") stay words. A Korean number read aloud in
Sino-Korean digits (``lexicon/spoken_digits_ko.txt``: "공일공 일이삼사 오육칠팔") is read so
too: groups of two syllables or more and nine digits at least, a ``-`` between groups, or one
group of ten; "이사", "오이", "공구" are words.
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
    return _spoken(_file_names(_spelling(_url_decoded(_unicode(text)))))


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


_TWO_DROPPED = 8  # "passport": two letters may go; "licence" keeps one-edit typos only


@cache
def _typos() -> dict[str, str]:
    """Mistyped word -> the document word it is one edit from (real words left out)."""
    targets = word_list("typo_targets")
    keep = set(targets) | set(word_list("typo_real_words"))
    out: dict[str, str] = {}
    for target in targets:
        for typo in sorted(_one_edit(target) - keep):
            out.setdefault(typo, target)
    for target in (t for t in targets if len(t) >= _TWO_DROPPED):
        for typo in sorted(_two_dropped(target) - keep):
            out.setdefault(typo, target)
    return out


def _two_dropped(word: str) -> set[str]:
    """``word`` with two of its letters after the first dropped, as a word typed in a hurry
    loses them ("psport", "pasprt"): only for words of :data:`_TWO_DROPPED` letters or more,
    where what is left is still no other word."""
    return {
        word[:i] + word[i + 1 : j] + word[j + 1 :]
        for i in range(1, len(word))
        for j in range(i + 1, len(word))
    }


def _cased(word: str, like: str) -> str:
    if like.isupper():
        return word.upper()
    return word.capitalize() if like[:1].isupper() else word


def _spelling(norm: Normalized) -> Normalized:
    """``norm`` with each mistyped document word replaced by the word, the replacement mapped
    to the typo's span."""
    typos = _typos()
    return _replaced(
        norm,
        [
            (m.start(), m.end(), _cased(typos[m.group().lower()], m.group()))
            for m in _WORD.finditer(norm.text)
            if m.group().lower() in typos
        ],
    )


@cache
def _file_part() -> re.Pattern[str]:
    doc = "|".join(sorted(word_list("typo_targets"), key=len, reverse=True))
    return re.compile(
        rf"(?i)(?<![\p{{L}}\d])(?:{doc})(?:(?P<glued>(?=\d))|(?:[_-]\p{{L}}+(?=[_-])){{0,2}}[_-])"
        r"(?P<value>\p{L}*\d[\p{L}\d]*)(?P<after>[_.-](?=\w)|(?![\w-]))"
    )


def _file_names(norm: Normalized) -> Normalized:
    """``norm`` with a document's number in a file's name read with spaces around it (see the
    module); a number glued to the word gets its space from the word's last letter."""
    text = norm.text
    if "_" not in text and "-" not in text and not re.search(r"\p{L}\d", text):
        return norm
    fixes = []
    for m in _file_part().finditer(text):
        fixes += [(i, i + 1, " ") for i in range(m.start(), m.start("value")) if text[i] in "_-"]
        if m.group("glued") is not None:  # "Passport561190284"
            at = m.start("value") - 1
            fixes.append((at, at + 1, text[at] + " "))
        if m.group("after"):
            fixes.append((m.start("after"), m.end("after"), " "))
    return _replaced(norm, sorted(fixes))


# a token that is a URL, a path or a query ("?a=b&c=d"), and the escapes and plus signs in it
_URL_TOKEN = re.compile(r"[^\s\"'<>]*[?=/][^\s\"'<>]*")
_ESCAPES = re.compile(r"(?:%[0-9A-Fa-f]{2})+|(?<=\p{L})\+(?=\p{L})")


def _url_decoded(norm: Normalized) -> Normalized:
    """``norm`` with the escapes of its URL tokens decoded (see the module), each character
    mapped to the escape it was read from; an escape that is no UTF-8 stays as written."""
    if "%" not in norm.text and "+" not in norm.text:
        return norm
    fixes = []
    for token in _URL_TOKEN.finditer(norm.text):
        for m in _ESCAPES.finditer(token.group()):
            at = token.start() + m.start()
            if m.group() == "+":
                if "=" in token.group()[: m.start()]:  # a query's value, not "mongodb+srv:"
                    fixes.append((at, at + 1, " "))
                continue
            try:
                chars = bytes.fromhex(m.group().replace("%", "")).decode("utf-8")
            except UnicodeDecodeError:
                continue
            for char in chars:
                width = 3 * len(char.encode("utf-8"))
                if char.isprintable():
                    fixes.append((at, at + width, char))
                at += width
    return _replaced(norm, fixes)


_REPEATS = {"double": 2, "triple": 3}
_MIN_CHARACTERS = 7  # the shortest phone number without its area code
_MIN_SPELLED = 3  # words, not digits typed with spaces between


@cache
def _digit_table(name: str) -> dict[str, str]:
    """A lexicon of spoken digits: each entry a word, then the digit it stands for."""
    return dict(line.split() for line in word_list(name))


@cache
def _spoken_run() -> re.Pattern[str]:
    word = "|".join(sorted(_digit_table("spoken_digits"), key=len, reverse=True))
    token = (
        rf"(?:(?:{'|'.join(_REPEATS)})[ \t]+(?:{word})|{word}|\d+|(?-i:\p{{Lu}}))"
        r"(?![\p{L}\d'’])"
    )
    return re.compile(rf"(?i)(?<![\p{{L}}\d'’]){token}(?:(?:[ \t]*[,.-][ \t]*|[ \t]+){token})+")


_TOKEN = re.compile(r"(?i)(?:(double|triple)[ \t]+)?(\p{L}+|\d+)")
# a capital letter read out inside a number ("one Z nine nine nine", "C zero one X ..."), but
# not "I" or "A" at either end of the run ("... six seven I think", "A four five ...")
_NOT_AT_ENDS = frozenset("IA")


def _letter(token: re.Match[str]) -> bool:
    """Whether a run's token is a capital letter read out."""
    return len(token.group(2)) == 1 and token.group(2).isupper()


def _trimmed(tokens: list[re.Match[str]], run: str) -> list[re.Match[str]]:
    """The tokens of ``run`` that read a number: a letter ending it after a comma or a stop
    opens the next clause ("..., C as in Charlie")."""
    while tokens and (
        tokens[-1].group(2) in _NOT_AT_ENDS
        or (
            _letter(tokens[-1])
            and len(tokens) > 1
            and re.search(r"[,.]", run[tokens[-2].end() : tokens[-1].start()])
        )
    ):
        tokens.pop()
    while tokens and tokens[0].group(2) in _NOT_AT_ENDS:
        tokens.pop(0)
    return tokens


def _said(tokens: list[re.Match[str]], words: dict[str, str]) -> list[str]:
    """What each token of a run stands for: its digit(s), a number as typed, or a letter; a
    capital "O" beside a letter is one ("M O R G A"), else a zero."""
    letters = [_letter(t) for t in tokens]
    out = []
    for i, t in enumerate(tokens):
        word = t.group(2)
        beside_letter = any(
            letters[j] and tokens[j].group(2) != "O" for j in (i - 1, i + 1) if 0 <= j < len(tokens)
        )
        if word == "O" and beside_letter:
            out.append("O")
            continue
        out.append(words.get(word.lower(), word) * _REPEATS.get((t.group(1) or "").lower(), 1))
    return out


def _spoken(norm: Normalized) -> Normalized:
    """``norm`` with each number read aloud written as its digits (see the module), each digit
    mapped to the words it was read from."""
    words = _digit_table("spoken_digits")
    fixes = []
    for run in _spoken_run().finditer(norm.text):
        tokens = _trimmed(list(_TOKEN.finditer(run.group())), run.group())
        said = _said(tokens, words)
        spelled = sum(
            t.group(2).lower() in words and t.group(2) != s
            for t, s in zip(tokens, said, strict=True)
        )
        if spelled < _MIN_SPELLED or len("".join(said)) < _MIN_CHARACTERS:
            continue
        at = run.start() + tokens[0].start()
        for token, number in zip(tokens, said, strict=True):
            start, end = run.start() + token.start(), run.start() + token.end()
            if at < start:  # the gap before it: a group's mark, or nothing
                fixes.append((at, start, "-" if re.search(r"[,.-]", norm.text[at:start]) else ""))
            fixes.append((start, end, number))
            at = end
    return _replaced(norm, sorted(fixes + _spoken_korean(norm.text)))


@cache
def _korean_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A run of Korean digit groups, and one group of it."""
    syllables = f"[{''.join(_digit_table('spoken_digits_ko'))}]"
    group = f"{syllables}{{2,}}"
    run = re.compile(rf"(?<!\p{{Hangul}}){group}(?:[ \t]*[,-]?[ \t]*{group})*")
    return run, re.compile(f"{syllables}+")


_MIN_KOREAN_DIGITS = 9  # a Seoul number with its area code (02-345-6789)
_ONE_KOREAN_GROUP = 10  # a mobile number read without a pause


def _spoken_korean(text: str) -> list[tuple[int, int, str]]:
    """The fixes that write a Korean number read aloud as its digits: groups of two syllables
    or more ("공일공 일이삼사 오육칠팔"), nine digits at least (ten in one group), each gap
    between groups a ``-`` (010-1234-5678)."""
    digits = _digit_table("spoken_digits_ko")
    runs, group = _korean_patterns()
    fixes: list[tuple[int, int, str]] = []
    for run in runs.finditer(text):
        groups = list(group.finditer(run.group()))
        read = sum(len(g.group()) for g in groups)
        if read < _MIN_KOREAN_DIGITS or (len(groups) == 1 and read < _ONE_KOREAN_GROUP):
            continue
        at = None
        for g in groups:
            start, end = run.start() + g.start(), run.start() + g.end()
            if at is not None:
                fixes.append((at, start, "-"))
            fixes.append((start, end, "".join(digits[c] for c in g.group())))
            at = end
    return fixes


def _replaced(norm: Normalized, fixes: list[tuple[int, int, str]]) -> Normalized:
    """``norm`` with each ``(start, end, new)`` of ``fixes`` (in order, apart) replaced, every
    character of ``new`` mapped to the original span of ``norm.text[start:end]``."""
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
        if word and end > start:
            out.append(word)
            new_starts += [starts[start]] * len(word)
            new_ends += [ends[end - 1]] * len(word)
        at = end
    return Normalized("".join(out), tuple(new_starts), tuple(new_ends))
