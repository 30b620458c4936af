"""Numbers read aloud as a voice agent's speech-to-text writes them: the normalisation stage
reads a run of digit words as its digits (offsets mapped back onto the words), and leaves
short runs and sentences that only count alone. Sentences written for this test, none from
the corpora."""

from __future__ import annotations

import pytest

from tasks.pii.normalize import normalize


def _read(text: str) -> str:
    return normalize(text).text


@pytest.mark.parametrize(
    ("said", "read"),
    [
        ("call me on oh seven seven double oh nine oh oh one two three", "call me on 07700900123"),
        ("it's triple five, zero one nine eight, two two", "it's 555-0198-22"),
        ("SSN one two three, four five, six seven eight two", "SSN 123-45-6782"),
        ("Five Four Eight two one three three zero seven", "548213307"),
        ("passport C zero one X zero zero T four seven please", "passport C01X00T47 please"),
        ("licence M O R G A seven five three one one six S M nine I J", "licence MORGA753116SM9IJ"),
        ("ref 77 three one zero zero four five", "ref 77310045"),
    ],
)
def test_a_number_read_aloud_is_read_as_its_digits(said: str, read: str) -> None:
    assert _read(said) == read


@pytest.mark.parametrize(
    "text",
    [
        "press one for billing, two for support, or nine to repeat",
        "I need two or three more boxes, maybe four",
        "the error says four oh four then five oh three",
        "the flight is B A one one seven leaving at five thirty",
        "it cost nine ninety nine plus shipping",
        "five six seven I think one two three four",
        "the one on file, and the other one too",
        "548 213 307 as typed with spaces",  # digits typed, not read: left as the user wrote them
    ],
)
def test_short_runs_counting_and_typed_digits_stay_as_written(text: str) -> None:
    assert _read(text) == text


def test_the_digits_map_back_onto_the_words_they_were_read_from() -> None:
    text = "my number is oh seven seven double oh nine oh oh one two three, thanks"
    norm = normalize(text)
    start = norm.text.index("07700900123")
    s, e = norm.original_span(start, start + len("07700900123"))
    assert text[s:e] == "oh seven seven double oh nine oh oh one two three"
    # a letter ending the number after a comma opens the next clause
    spelled = "passport C zero one X zero zero T four seven, C as in cat"
    assert _read(spelled) == "passport C01X00T47, C as in cat"
