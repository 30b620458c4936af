"""The learned English name layer as a recogniser: the PERSON spans of the spaCy pipeline in
``models/pii-names-en`` (trained by ``python -m tasks.pii.learned.train``; see
``docs/privacy.md``), corroborated as the main model's are, and left to the main model where
it calls the same words a place, an organisation or a product (the layer learned places and
companies only from generated text; the main model from real text) unless the lexicon
clearly knows them as a name. Off unless
``FLYWHEEL_CURATE__LEARNED_NAMES`` is true; loaded once per process from the repository, never
downloaded."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from infra.errors import MissingDependencyError
from tasks.pii.lexicon import STOP_WORDS
from tasks.pii.names import corroborated, known, lexicon_support
from tasks.pii.names.vocabulary import unseen
from tasks.pii.span_recognizer import person_recognizer

MODEL_DIR = Path(__file__).resolve().parents[3] / "models" / "pii-names-en"
SCORE = 0.5
# the main pipeline's labels (as Presidio maps them, or spaCy's own) for what is no person
NOT_PEOPLE = frozenset({"LOCATION", "ORGANIZATION", "PRODUCT", "NORP", "GPE", "LOC", "FAC", "ORG"})


@lru_cache(maxsize=2)
def load_layer(path: Path = MODEL_DIR) -> Any:
    """The trained pipeline (loaded once per process; see :func:`load_pipeline`)."""
    return load_pipeline(path, "learned name layer", "tasks.pii.learned.train", "pii-names-en")


def load_pipeline(path: Path, what: str, trainer: str, folder: str) -> Any:
    """A learned layer's spaCy pipeline from the repository (never downloaded).

    Raises:
        MissingDependencyError: the folder holds no pipeline (the message says how to train one).
    """
    import spacy

    if not (path / "config.cfg").is_file():
        raise MissingDependencyError(
            f"the {what} is not at {path}; train it with "
            f"`python -m {trainer} --out models/{folder} --seed 0`"
        )
    return spacy.load(path)


def learned_name_spans(
    nlp: Any,
    text: str,
    main_entities: Sequence[Any] = (),
) -> list[tuple[int, int]]:
    """The layer's PERSON spans in ``text`` that something corroborates (a brand or a place the
    layer calls a person is dropped, as for the main model) and that the main model's
    ``main_entities`` do not call a place, an organisation or a product (unless the lexicon
    clearly knows the words as a name)."""
    others = [(e.start_char, e.end_char) for e in main_entities if e.label_ in NOT_PEOPLE]
    out = []
    for ent in nlp(text).ents:
        start, end = ent.start_char, ent.end_char
        if ent.label_ != "PERSON" or not corroborated(text, start, end, model=True):
            continue
        claimed = any(s < end and e > start for s, e in others)
        if not claimed or lexicon_support(text[start:end]) == 2:
            out.append((start, end))
    return out


def learned_names(language: str) -> Any:
    """The recogniser (its pipeline loaded now, once per process)."""
    nlp = load_layer()
    return person_recognizer(
        name="LearnedNameRecognizer",
        score=SCORE,
        spans=lambda text, artifacts: learned_name_spans(
            nlp, text, getattr(artifacts, "entities", None) or []
        ),
        doc="Names the learned layer finds (models/pii-names-en), corroborated.",
    )(supported_language=language)


def lower_case_name_spans(nlp: Any, text: str, main_tokens: Any = None) -> list[tuple[int, int]]:
    """The layer's names in a text typed without a capital letter, where the rules, which read
    a name by its capitals, find few: each of its PERSON spans without the words at its ends
    that are no name (:func:`_no_name_word`), kept when two or three words the name lexicon
    half knows at least ("tomasz wieczorek", "chidi okafor") and nothing says they are no
    one's (:func:`~tasks.pii.names.corroborated`)."""
    if any(c.isupper() for c in text) or lexicon_support(text) == 0:
        return []  # (a text with no word the name lexicon knows holds no name kept below)
    seen: frozenset[str] | None = None
    out = []
    for ent in nlp(text).ents:
        if ent.label_ != "PERSON":
            continue
        if seen is None:  # the main model's words, only once a name is there to trim
            seen = _seen_words(main_tokens)
        words = [(t.idx, t.idx + len(t)) for t in ent if t.is_alpha]
        while words and _no_name_word(text[slice(*words[-1])], seen):
            words.pop()
        while words and _no_name_word(text[slice(*words[0])], seen):
            words.pop(0)
        if not words:
            continue
        start, end = words[0][0], words[-1][1]
        span = text[start:end]
        full = 2 <= len(words) <= 3 and lexicon_support(span) >= 1
        if full and corroborated(text, start, end):
            out.append((start, end))
    return out


def _seen_words(tokens: Any) -> frozenset[str]:
    """The words of the main model's tokens that it met in training."""
    if tokens is None:
        return frozenset()
    return frozenset(t.lower_ for t in tokens if not unseen(t))


def _no_name_word(word: str, seen: frozenset[str]) -> bool:
    """A word at a name span's end that is no part of it: an English stop word, or a word the
    name lexicon lacks that is short ("ppt") or that the main model met in training
    ("passport", "given")."""
    w = word.lower()
    return w in STOP_WORDS or (not known(w) and (len(w) <= 3 or w in seen))


def lower_case_names(language: str) -> Any:
    """The recogniser of names typed in lower case (its pipeline loaded now, once per
    process)."""
    nlp = load_layer()
    return person_recognizer(
        name="LowerCaseLearnedNameRecognizer",
        score=SCORE,
        spans=lambda text, artifacts: lower_case_name_spans(
            nlp, text, getattr(artifacts, "tokens", None)
        ),
        doc="Names typed in lower case the learned layer finds (models/pii-names-en).",
    )(supported_language=language)
