"""The anonymiser's word lists as data: each says where it comes from, and the copy of spaCy's
English stop words is the installed spaCy's own (an upgrade that changes it fails here)."""

from __future__ import annotations

from tasks.pii.lexicon import HERE, STOP_WORDS


def test_every_word_list_says_where_its_words_come_from() -> None:
    lists = sorted(HERE.glob("*.txt"))
    assert lists
    for path in lists:
        first = path.read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("# source:"), path.name


def test_the_stop_words_are_the_installed_spacys() -> None:
    from spacy.lang.en.stop_words import STOP_WORDS as SPACY

    assert frozenset(SPACY) == STOP_WORDS
