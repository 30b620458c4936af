"""The learned Korean name layer as a recogniser: the PERSON spans of the spaCy pipeline in
``models/pii-names-ko`` (trained by ``python -m tasks.pii.learned.train_ko``; see
``docs/privacy.md``), kept when they are shaped like a Korean name: Hangul only, two to four
syllables, or a surname alone before a title (``김 과장님``), and not a word the Korean name
rules know as no one (places, role words, ``배송지``), and where kiwipiepy reads no ordinary
word in them. Off unless ``FLYWHEEL_CURATE__LEARNED_NAMES`` is true; loaded once per process
from the repository, never downloaded."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import regex as re

from tasks.pii.korean.name_lists import ROLE_WORDS, SURNAMES, place_words, surname_split
from tasks.pii.korean.names import given_like
from tasks.pii.lexicon import word_list
from tasks.pii.ner.learned_names import load_pipeline
from tasks.pii.span_recognizer import person_recognizer

MODEL_DIR = Path(__file__).resolve().parents[3] / "models" / "pii-names-ko"
SCORE = 0.5
_NAME = re.compile(r"[가-힣]{2,4}")
_TITLE_AFTER = re.compile(
    "\\s?(?:" + "|".join(sorted(word_list("learned_titles_ko"), key=len, reverse=True)) + ")"
)


@lru_cache(maxsize=2)
def load_layer(path: Path = MODEL_DIR) -> Any:
    """The trained pipeline (loaded once per process; see
    :func:`~tasks.pii.ner.learned_names.load_pipeline`).

    Raises:
        MissingDependencyError: the folder holds no pipeline (the message says how to train one).
    """
    import tasks.pii.learned.ko_tokens  # noqa: F401  # registers the pipeline's tokenizer

    return load_pipeline(
        path, "learned Korean name layer", "tasks.pii.learned.train_ko", "pii-names-ko"
    )


def name_shaped(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` may be a Korean person's name where the layer found it."""
    span = text[start:end]
    if span in ROLE_WORDS or span in place_words():
        return False
    if len(span) == 1:
        return span in SURNAMES.split("|") and bool(_TITLE_AFTER.match(text, end))
    if not _NAME.fullmatch(span):
        return False
    return surname_split(span) is not None if len(span) > 2 else given_like(span)


def learned_name_spans_ko(
    nlp: Any, text: str, tokenize: Callable[[str], list[Any]] | None = None
) -> list[tuple[int, int]]:
    """The layer's PERSON spans in ``text`` (up to their first space) that are shaped like a
    Korean name and, where ``tokenize`` (kiwipiepy's) is given, that start and end where kiwi's
    morphemes do (not ``신한카`` of ``신한카드``) and that hold no ordinary word kiwi knows of
    two syllables or more (``지원``, ``보고서``; a name kiwi splits into one-syllable words,
    ``시/은``, stays)."""
    spans = []
    for ent in nlp(text).ents:
        start, end = ent.start_char, ent.end_char
        if " " in ent.text:  # "유민혁 상" of "유민혁 상담사": a name here holds no space
            end = start + ent.text.index(" ")
        if ent.label_ == "PERSON" and name_shaped(text, start, end):
            spans.append((start, end))
    if not spans or tokenize is None:
        return spans
    tokens = tokenize(text)
    starts, ends = {t.start for t in tokens}, {t.end for t in tokens}
    return [
        (s, e)
        for s, e in spans
        if s in starts
        and e in ends
        and not any(
            s <= t.start and t.end <= e and t.len >= 2 and t.tag != "NNP" and not t.oov
            for t in tokens
        )
    ]


def learned_names_ko(language: str) -> Any:
    """The recogniser (its pipeline and kiwipiepy loaded now, once per process)."""
    from tasks.pii.korean import load_kiwi

    nlp, kiwi = load_layer(), load_kiwi()
    return person_recognizer(
        name="LearnedKoreanNameRecognizer",
        score=SCORE,
        spans=lambda text, _artifacts: learned_name_spans_ko(nlp, text, kiwi.tokenize),
        doc="Korean names the learned layer finds (models/pii-names-ko), name-shaped.",
    )(supported_language=language)
