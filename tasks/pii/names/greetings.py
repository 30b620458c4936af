"""English names where people write them without capitals: after a greeting or
self-introduction ("hey its diane metcalfe again", "im john and ...", "..., adaeze okonkwo
here again") and in a sign-off
("thanks, diane", "regards john pritchard", "- renee carter", "Thanks so much! Donna").

A candidate is one or two words right after the cue; a word is a name word unless it is an
English stop word or one of the words people put there instead of a name ("again", "team",
"urgent", "everyone"), or it ends like a verb or adverb ("-ing", "-ed", "-ly"). spaCy's
tagger cannot tell a lower-case name (it tags one a common noun, a foreign word, at times an
adjective) but it does tell the words people put after "it's", "I'm" and "this is" instead:
a lower-case word it met in training and reads as an adjective, adverb, verb or function
word ("it's public anyway", "I'm afraid", "this is hopeless", "Sorry, it's late here") is a
name word only where the lexicon knows it as a given name ("im priya and ...", which it tags
an adjective).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import regex as re

from tasks.pii.lexicon import alternatives
from tasks.pii.names import NOT_GREETED, REPLIES, fold, known, lexicon
from tasks.pii.names.vocabulary import unseen
from tasks.pii.span_recognizer import person_recognizer

# a name's word, initials before it as German and Dutch given names write them ("H.-Dieter")
_WORD = r"(?:\p{Lu}\.-?)*\p{L}[\p{L}'’-]*"
_INITIALS = re.compile(r"^(?:\p{L}\.-?)+(?=\p{L})")
# the cues a name follows, tried in order: greetings and self-introductions ("hey", "i'm",
# "this is"), an opening "its", "my name is", "name's", "call me", then the sign-offs
# ("regards", "thanks", "sent by")
_OPENERS = alternatives("greetings_openers")
_BEFORE_ITS = alternatives("greetings_before_its")  # "hey its ...", "oh, it's ..."
_SIGN_OFFS = alternatives("greetings_sign_offs")
_CUE = re.compile(
    rf"(?i)(?:^|(?<=[\s,.!?;:(]))(?:{_OPENERS}|"
    # "its" opening the message or after a greeting, not the possessive ("on its way")
    rf"(?:(?<=^|[,.!?;:][ \t]*|(?:{_BEFORE_ITS})[,!]?[ \t]+)(?:its|it's|it’s))|"
    r"my name is|name's|call me|"
    rf"{_SIGN_OFFS})[,.!:]?\s+"
    rf"({_WORD})(?:\s+({_WORD}))?"
)
# a self-identification after a clause or at the start: "..., adaeze okonkwo here again"
_HERE = re.compile(
    rf"(?:^|(?<=[,.!?;:\n])[ \t]*)({_WORD})(?:[ \t]+({_WORD}))?"
    r"[ \t]+here(?:[ \t]+(?:again|from|with)\b|[ \t]*[,.!–—-]|[ \t]*$)"
)
_DASH = re.compile(rf"(?m)^\s*[-–—~]\s*({_WORD})(?:\s+({_WORD}))?\s*$")
_FINAL = re.compile(
    # the name after a comma, a stop or a dash ("thanks — Henrietta")
    r"(?i)(?:thanks|thank you|regards|cheers|best|thx|ty)\b[^\n]{0,25}?(?:[,.!]|[ \t]-+)\s+"
    rf"({_WORD})(?:\s+({_WORD}))?\s*[.!]?\s*$"
)
# a self-introduction: the word after it is the writer's name, whatever its case ("I'm tendai")
_INTRODUCTION = re.compile(
    r"(?i)(?<![\p{L}'’])(?:im|i'm|i’m|i am|this is|its|it's|it’s|my name is|name's|call me)"
    r"(?![\p{L}'’])"
)


# a letter's greeting: "Hi Eleftheria," opening the message or a line, one word, a comma
_LETTER_GREETINGS = alternatives("greetings_letter_greetings")
_LETTER_GREETING = re.compile(rf"(?i)(?:^|\n)[ \t]*(?:{_LETTER_GREETINGS})[ \t]+$")
_LETTER_COMMA = re.compile(r"[ \t]*(?:[,!]|[-–—][ \t]|$)", re.M)


def greeted_name(text: str, start: int, end: int) -> bool:
    """``text[start:end]`` is one capitalised word a letter greets ("Hi Eleftheria,\n"): a
    name, whether or not the lexicon knows it (Greek, Māori, Japanese given names)."""
    word = text[start:end]
    return (
        word[:1].isupper()
        and word.isalpha()
        and word.lower() not in NOT_GREETED
        and bool(_LETTER_GREETING.search(text, max(0, start - 12), start))
        and bool(_LETTER_COMMA.match(text, end))
    )


# Penn tags of the words that are never a name: adjectives, adverbs, verbs, pronouns,
# determiners, prepositions, modals and wh-words (a name tags NN, NNP, FW or, in lower
# case, at times JJ: a given name the lexicon knows passes)
_NOT_NAME_TAGS = re.compile(alternatives("greetings_not_name_tags"))


def _tags(doc: Any) -> dict[int, str]:
    """spaCy's Penn tag of each token by its start offset, for the words the model met in
    training (of a word it never met, "oluwaseun", the tag is a guess); none without a
    tagger."""
    return {t.idx: t.tag_ for t in doc if not unseen(t)} if doc is not None else {}


def _tagged_other(word: str, start: int, tags: dict[int, str], *, second: bool = False) -> bool:
    """Whether the lower-case ``word`` at ``start`` tags as a word no name is, and the
    lexicon knows it as no given name (``second``: the word after a name, as no name at all:
    "this is maria lopez", which the tagger calls an adverb)."""
    return (
        word[:1].islower()
        and bool(_NOT_NAME_TAGS.fullmatch(tags.get(start, "")))
        and not (known(word) if second else fold(word) in lexicon()[0])
    )


def _is_name_word(word: str, stop: frozenset[str]) -> bool:
    w = _INITIALS.sub("", word.lower()).strip("'’-")
    return (
        len(w) > 1
        and w not in stop
        and w not in REPLIES
        and not w.endswith(("ing", "ed", "n't", "’t"))
        # a hyphenated or elided given name or surname ("jean-luc", "o'brien")
        and bool(re.fullmatch(r"\p{L}+(?:['’-]\p{L}+)*", w))
    )


def _writes_capitals(text: str) -> bool:
    """Whether the writer starts the message with a capital ("Hi, ...", "Thanks, ..."): one
    who does writes a name with one too, so a lower-case word after a greeting or a sign-off
    is a name only where the name lexicon knows it ("Hi, john ..."); after a
    self-introduction any word is ("I'm tendai"); "hi, bongani here" is another writer's."""
    first = re.search(r"\p{L}", text)
    return bool(first and first.group(0).isupper())


def lower_case_name_spans(text: str, doc: Any = None) -> list[tuple[int, int]]:
    """Spans of the names in greeting, introduction and sign-off positions; ``doc``: spaCy's
    tagged tokens of ``text``, when the pipeline has a tagger (see the module)."""
    from tasks.pii.lexicon import STOP_WORDS

    stop = frozenset(STOP_WORDS)
    capitals = _writes_capitals(text)
    tags = _tags(doc)
    spans = []
    for regex in (_CUE, _DASH, _FINAL, _HERE):
        for m in regex.finditer(text, overlapped=True):
            if (
                not m.group(1)
                or not _is_name_word(m.group(1), stop)
                or _tagged_other(m.group(1), m.start(1), tags)
            ):
                continue
            if (
                regex in (_CUE, _FINAL)
                and capitals
                and m.group(1).islower()
                and not _INTRODUCTION.search(text, m.start(), m.start(1))
                and not known(m.group(1))
            ):
                # "Hi, deliver to the back door", "Thanks, works now": this writer would
                # capitalise a name
                continue
            end = m.end(1)
            if (
                m.group(2)
                and _is_name_word(m.group(2), stop)
                and not _tagged_other(m.group(2), m.start(2), tags, second=True)
            ):
                end = m.end(2)
            spans.append((m.start(1), end))
    return spans


def lower_name_recognizer(keep: Callable[[str, int, int], bool] | None = None) -> type:
    """The recogniser of :func:`lower_case_name_spans`; ``keep(text, start, end)`` filters
    its spans (the English engine checks that something corroborates each name), a name a
    letter greets (:func:`greeted_name`) passes."""
    return person_recognizer(
        name="LowerCaseNameRecognizer",
        score=0.45,
        spans=lambda text, nlp: [
            (s, e)
            for s, e in lower_case_name_spans(text, getattr(nlp, "tokens", None))
            if keep is None or keep(text, s, e) or greeted_name(text, s, e)
        ],
        doc="Names in greeting and sign-off positions, any case (see the module).",
    )
