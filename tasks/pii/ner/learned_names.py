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
from tasks.pii.names import corroborated, lexicon_support
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
