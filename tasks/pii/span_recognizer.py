"""The shapes of flywheel's own Presidio recognisers: one regex as an entity
(:func:`pattern_recognizer`), and recognisers that report the spans a function finds
(:func:`span_recognizer`; :func:`person_recognizer` for names: English fallback, any-case
greetings, Korean names), where a regex alone cannot say it (context words, checksums)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tasks.pii.names import product_modifier

Spans = Callable[[str, Any], Iterable[tuple[int, int]]]  # (text, nlp_artifacts) -> spans
# (text, nlp_artifacts) -> (start, end, entity, score)
TypedSpans = Callable[[str, Any], Iterable[tuple[int, int, str, float]]]


def pattern_recognizer(
    entity: str,
    regex: str,
    score: float,
    name: str,
    *,
    language: str,
    valid: Callable[[str], bool] | None = None,
) -> Any:
    """``entity`` wherever ``regex`` matches, at ``score``, for ``language``; only where
    ``valid`` holds for the matched text, when given (a checksum, a numbering plan)."""
    from presidio_analyzer import Pattern, PatternRecognizer

    class Validated(PatternRecognizer):
        def validate_result(self, pattern_text: str) -> bool | None:
            return None if valid is None else valid(pattern_text)

    return Validated(
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
    reports each span of ``spans(text, nlp_artifacts)`` as ``entity`` at ``score``; a name
    that is a product's modifier ("the Paul Mitchell shampoo") is a brand, whoever finds it."""

    def found(text: str, nlp_artifacts: Any) -> list[tuple[int, int, str, float]]:
        hits = list(spans(text, nlp_artifacts))
        if entity == "PERSON":
            tokens = getattr(nlp_artifacts, "tokens", None)
            hits = [(s, e) for s, e in hits if not product_modifier(tokens, s, e)]
        return [(s, e, entity, score) for s, e in hits]

    return typed_span_recognizer(name=name, entities=[entity], spans=found, doc=doc)


def typed_span_recognizer(
    *, name: str, entities: list[str], spans: TypedSpans, doc: str = ""
) -> type:
    """The one recogniser factory: a recognizer class named ``name`` (its constructor takes
    ``supported_language``) reporting each ``(start, end, entity, score)`` of
    ``spans(text, nlp_artifacts)`` whose entity was asked for, without the whitespace at its
    ends."""
    from presidio_analyzer import LocalRecognizer, RecognizerResult

    class SpanRecognizer(LocalRecognizer):
        __doc__ = doc

        def __init__(self, supported_language: str = "en") -> None:
            super().__init__(
                supported_entities=list(entities),
                supported_language=supported_language,
                name=name,
            )

        def load(self) -> None:
            pass

        def analyze(self, text: str, entities: list[str], nlp_artifacts: Any = None) -> list:
            wanted = set(entities) & set(self.supported_entities)
            if not wanted:
                return []
            meta = {
                RecognizerResult.RECOGNIZER_NAME_KEY: name,
                RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: self.id,
            }
            found = []
            for start, end, etype, score in spans(text, nlp_artifacts):
                start, end = _trimmed(text, start, end)
                if etype in wanted and start < end:
                    found.append(
                        RecognizerResult(etype, start, end, score, recognition_metadata=dict(meta))
                    )
            return found

    SpanRecognizer.__name__ = SpanRecognizer.__qualname__ = name
    return SpanRecognizer


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    """The span without the spaces and line breaks at its ends: a replacement keeps a YAML
    record's or a form's lines and indentation ("name: Ana Lima\n  passport_no: ...")."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
