"""The shapes of flywheel's own Presidio recognisers: one regex as an entity
(:func:`pattern_recognizer`), and recognisers that report the spans a function finds
(:func:`span_recognizer`; :func:`person_recognizer` for names: English fallback, any-case
greetings, Korean names), where a regex alone cannot say it (context words, checksums)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tasks.pii.names import product_modifier

Spans = Callable[[str, Any], Iterable[tuple[int, int]]]  # (text, nlp_artifacts) -> spans


def pattern_recognizer(entity: str, regex: str, score: float, name: str, *, language: str) -> Any:
    """``entity`` wherever ``regex`` matches, at ``score``, for ``language``."""
    from presidio_analyzer import Pattern, PatternRecognizer

    return PatternRecognizer(
        supported_entity=entity,
        name=name,
        supported_language=language,
        patterns=[Pattern(name, regex, score)],
    )


def person_recognizer(*, name: str, score: float, spans: Spans, doc: str) -> type:
    """A recognizer class named ``name`` (its constructor takes ``supported_language``) that
    reports each span of ``spans(text, nlp_artifacts)`` as ``PERSON`` at ``score``."""
    return span_recognizer(entity="PERSON", name=name, score=score, spans=spans, doc=doc)


def span_recognizer(*, entity: str, name: str, score: float, spans: Spans, doc: str) -> type:
    """A recognizer class named ``name`` (its constructor takes ``supported_language``) that
    reports each span of ``spans(text, nlp_artifacts)`` as ``entity`` at ``score``."""
    from presidio_analyzer import LocalRecognizer, RecognizerResult

    class SpanRecognizer(LocalRecognizer):
        __doc__ = doc

        def __init__(self, supported_language: str = "en") -> None:
            super().__init__(
                supported_entities=[entity], supported_language=supported_language, name=name
            )

        def load(self) -> None:
            pass

        def analyze(self, text: str, entities: list[str], nlp_artifacts: Any = None) -> list:
            if entity not in entities:
                return []
            found = spans(text, nlp_artifacts)
            if entity == "PERSON":  # "the Paul Mitchell shampoo": a brand, whoever finds it
                doc = getattr(nlp_artifacts, "tokens", None)
                found = [(s, e) for s, e in found if not product_modifier(doc, s, e)]
            return [
                RecognizerResult(
                    entity,
                    start,
                    end,
                    score,
                    recognition_metadata={
                        RecognizerResult.RECOGNIZER_NAME_KEY: name,
                        RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: self.id,
                    },
                )
                for start, end in found
            ]

    SpanRecognizer.__name__ = SpanRecognizer.__qualname__ = name
    return SpanRecognizer
