"""What every recogniser built by :mod:`tasks.pii.span_recognizer` reports."""

from __future__ import annotations

from tasks.pii.span_recognizer import typed_span_recognizer


def test_a_finding_never_takes_the_line_break_after_it() -> None:
    """A recogniser's span that runs on over the line break and indentation after a name
    (the fallback did, on "name: Ana Lima\\n  passport_no: ...") is reported without them,
    so the replacement keeps a YAML record's lines."""
    text = "traveller:\n  name: Ines Duarte\n  passport_no: CB4410275"
    start = text.index("Ines")
    recognizer = typed_span_recognizer(
        name="Greedy",
        entities=["PERSON"],
        spans=lambda t, _nlp: [(start - 1, t.index("passport_no"), "PERSON", 0.5)],
    )()
    (found,) = recognizer.analyze(text, ["PERSON"])
    assert text[found.start : found.end] == "Ines Duarte"
