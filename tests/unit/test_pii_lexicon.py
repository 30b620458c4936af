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


def test_no_word_list_over_five_words_is_typed_in_the_code() -> None:
    """A list of words a pattern tries is data: more than five plain words as alternatives in one
    string literal of ``tasks/pii`` belong in a ``lexicon/*.txt`` file."""
    import ast
    import re

    root = HERE.parent
    typed = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                alts = (part.strip("()?:^$") for part in node.value.split("|"))
                words = [alt for alt in alts if re.fullmatch(r"[\w가-힣]+", alt)]
                if len(words) > 5:
                    typed.append(f"{path.relative_to(root)}:{node.lineno} {len(words)} words")
    assert typed == []
