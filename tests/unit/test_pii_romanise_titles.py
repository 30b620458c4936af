"""Greek names romanised as people type them (so the name lexicon knows "Eleftheria"), and
lists of titles sold together, which are no list of people."""

from __future__ import annotations

import pytest

from tasks.pii.names.romanise import greek
from tasks.pii.names.titles import in_title_list


@pytest.mark.parametrize(
    ("written", "typed"),
    [("Ελευθερία", "eleftheria"), ("Σταύρος", "stavros"), ("Ευάγγελος", "evangelos")],
)
def test_greek_names_read_as_they_are_typed(written: str, typed: str) -> None:
    assert greek(written) == typed


@pytest.mark.parametrize(
    ("text", "item", "titles"),
    [
        (
            "Halo Infinite, Forza Horizon II and Gears Tactics are on the bundle",
            "Halo Infinite",
            True,
        ),
        ("Mad Max, Rambo III and Total Recall are in the 4K box set", "Mad Max", True),
        ("Anna Berg, Tom Lind and Eva Holm are on the team", "Anna Berg", False),
        ("Anna Berg and Tom Lind got the bundle yesterday", "Tom Lind", False),
        ("the bundle includes Hollow Knight, Celeste and Stardew Valley", "Hollow Knight", True),
        ("the collection team includes Anna Berg and Tom Lind", "Anna Berg", False),
    ],
)
def test_a_list_is_titles_only_when_it_is_sold_together(text: str, item: str, titles: bool) -> None:
    start = text.index(item)
    assert in_title_list(text, start, start + len(item)) is titles
