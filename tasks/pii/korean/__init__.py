"""Korean personal data for Presidio (``language='ko'``): names (kiwipiepy's morphology plus the
cues Koreans write around them), registration numbers, passports, licences, birth dates,
phones, accounts, cards, plates, medical ids, secrets and addresses, each in its own module;
this one loads kiwipiepy and builds the recognisers :mod:`tasks.pii.registry` lists.

Patterns here never rely on ``\\b``: a digit followed by a Hangul particle (``...5678로``) is no
word boundary, so every pattern uses digit look-arounds instead. The Korean pipeline is
tokenizer-only spaCy (``blank:xx``) for Presidio plus kiwipiepy for morphology; a missing
kiwipiepy is a :class:`MissingDependencyError` naming the packages.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

import regex as re

from infra.errors import MissingDependencyError
from tasks.pii.korean.address import address_spans
from tasks.pii.korean.ids import ID_SPECS, id_spans, rrn_checksum_ok
from tasks.pii.korean.names import korean_name_spans
from tasks.pii.span_recognizer import (
    pattern_recognizer,
    person_recognizer,
    typed_span_recognizer,
)

__all__ = ["RECOGNIZERS", "has_hangul", "load_kiwi", "rrn_checksum_ok"]

HANGUL = re.compile(r"[\p{Hangul}]")
_BRN = r"(?<![\d-])\d{3}-\d{2}-\d{5}(?![\d-])"


def has_hangul(text: str) -> bool:
    """Whether the Korean pipeline applies to ``text``."""
    return bool(HANGUL.search(text))


@lru_cache(maxsize=1)
def load_kiwi() -> Any:
    """kiwipiepy's analyser with its bundled model (loaded once per process, offline).

    Raises:
        MissingDependencyError: kiwipiepy or kiwipiepy-model is not installed.
    """
    try:
        from kiwipiepy import Kiwi

        return Kiwi()
    except ImportError as exc:
        raise MissingDependencyError(
            "the Korean PII pipeline (FLYWHEEL_CURATE__LANGUAGES has 'ko') needs kiwipiepy "
            "and kiwipiepy-model: `pip install kiwipiepy kiwipiepy-model`"
        ) from exc
    except Exception as exc:  # kiwipiepy without its model raises on construction
        raise MissingDependencyError(
            f"kiwipiepy cannot load its model ({type(exc).__name__}); "
            "install it with `pip install kiwipiepy-model`"
        ) from exc


def _ids(language: str) -> Any:
    return typed_span_recognizer(
        name="KoreanIdRecognizer",
        entities=sorted({spec.entity for spec in ID_SPECS} | {"KR_FRN"}),
        spans=lambda text, _nlp: id_spans(text),
    )(supported_language=language)


def _address(language: str) -> Any:
    return typed_span_recognizer(
        name="KoreanAddressRecognizer",
        entities=["ADDRESS"],
        spans=lambda text, _nlp: [(s, e, "ADDRESS", score) for s, e, score in address_spans(text)],
    )(supported_language=language)


def _names(language: str) -> Any:
    kiwi = load_kiwi()  # fail at engine construction, naming the package, not mid-batch
    return person_recognizer(
        name="KoreanNameRecognizer",
        score=0.6,
        spans=lambda text, _nlp: korean_name_spans(text, kiwi.tokenize) if has_hangul(text) else [],
        doc="Korean person names (see :func:`tasks.pii.korean.names.korean_name_spans`).",
    )(supported_language=language)


# the Korean recognisers by name (tasks.pii.registry lists them with the generic ones that
# serve Korean too; korean.ids' IPv4 replaces the generic one: it works glued to a particle,
# 192.168.0.1에서, and leaves version numbers, 펌웨어 1.2.3.4 버전, alone)
RECOGNIZERS: dict[str, Callable[[str], Any]] = {
    "KrBrnShapeRecognizer": lambda language: pattern_recognizer(
        "KR_BRN", _BRN, 0.5, "KrBrnShapeRecognizer", language=language
    ),
    "KoreanIdRecognizer": _ids,
    "KoreanAddressRecognizer": _address,
    "KoreanNameRecognizer": _names,
}
