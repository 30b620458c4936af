"""Names with no cue word around them: a person as the subject of a clause ("Okechukwu rang
twice", "Ok so Chiamaka is picking up the order, she ...", "Ngozi and Emeka share the family
plan", "Adaeze Nwosu never received it") and a lower-case full name after a preposition
("forwarding this thread to tran minh khoa").

A clause's subject is also a company or a place ("Jumia said", "Santiago is lovely"), so the
subject rule wants a finite verb after the name (the tagger's, maybe after an adverb:
"never") and one of: a given name the lexicon clearly knows that the model does not call a
company or place; two such given names joined by "and" (the model's labels of single
unknown words are noise: "Ngozi" ORG); a one-word proper noun the words after it call "he"
or "she"; two or three capitalised words, none ambiguous, one known to the lexicon, that the
model does not call an organisation, place or product ("Sao Paulo has a depot" stays).
A lower-case run needs every word known to the name lexicon and none an English stop word
or an ambiguous name word ("to grace and hope").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tasks.pii.lexicon import STOP_WORDS, word_list
from tasks.pii.names import (
    AMBIGUOUS,
    EPONYMS,
    ORG_WORD,
    PLACE_WORD,
    STREET_FIRST,
    fold,
    lexicon,
    lexicon_support,
)

# what opens a clause before its subject
_OPENERS = frozenset(word_list("subjects_openers"))
_NOT_PERSON_ENT = frozenset(
    ["ORG", "GPE", "LOC", "FAC", "NORP", "PRODUCT", "WORK_OF_ART", "EVENT", "LAW"]
)
_PREPOSITIONS = frozenset(word_list("subjects_prepositions"))
_PERSONAL_PRONOUNS = frozenset(word_list("subjects_personal_pronouns"))


def subject_name_spans(
    text: str,  # noqa: ARG001 - a span finder's signature: the tokens suffice here
    nlp_artifacts: Any,
) -> list[tuple[int, int]]:
    """The names of the module docstring in ``text`` (spaCy's tokens needed)."""
    doc = getattr(nlp_artifacts, "tokens", None)
    if doc is None or not len(doc):
        return []
    spans = []
    i = 0
    while i < len(doc):
        j = name_run(doc, i)
        if j > i and _clause_start(doc, i):
            names = [(i, j)]
            k = j
            m = name_run(doc, k + 1) if k + 1 < len(doc) and doc[k].lower_ in ("and", "&") else k
            if m > k + 1:  # "Ngozi and Emeka"
                names.append((k + 1, m))
                k = m
            pair = len(names) > 1 and all(_person_like(doc, a, b, claimed=True) for a, b in names)
            if (
                _finite_verb_at(doc, k)
                and (pair or _person_like(doc, i, j) or _referred_to_as_person(doc, i, j, k))
                and all(_person_like(doc, a, b) or _beside_person(doc, a, b) for a, b in names[1:])
            ):
                spans += [(doc[a].idx, doc[b - 1].idx + len(doc[b - 1])) for a, b in names]
            i = k
            continue
        i += 1
    return spans + _lower_names(doc)


def name_run(doc: Any, i: int, word: Callable[[Any], bool] | None = None) -> int:
    """The end of a run of one to three capitalised alphabetic words at ``i`` (``i``: none);
    ``word``: what else each word must be."""
    j = i
    while j < len(doc) and j - i < 3 and capitalised(doc[j]) and (word is None or word(doc[j])):
        j += 1
    return j


def capitalised(tok: Any) -> bool:
    """Title-case alphabetic (hyphens and apostrophes allowed), not all capitals, no stop
    word."""
    text = tok.text
    return bool(
        text[:1].isupper()
        and not text.isupper()
        and text.replace("-", "").replace("'", "").isalpha()
        and tok.lower_ not in STOP_WORDS
    )


def _clause_start(doc: Any, i: int) -> bool:
    if i == 0:
        return True
    before = doc[i - 1]
    return bool(
        before.is_space
        or before.text in (".", "!", "?", ";", ",", ":")
        or (
            before.lower_ in _OPENERS
            and (i == 1 or not doc[i - 2].is_alpha or doc[i - 2].lower_ in _OPENERS)
        )
    )


def _finite_verb_at(doc: Any, k: int) -> bool:
    while k < len(doc) and doc[k].tag_ == "RB" and doc[k].is_lower:
        k += 1  # "never", "just", "still", "already"
    return k < len(doc) and doc[k].tag_ in ("VBD", "VBZ", "VBP", "MD")


def _person_like(doc: Any, a: int, b: int, *, claimed: bool = False) -> bool:
    """Whether ``doc[a:b]`` reads as a person's name (see module); ``claimed``: a given name
    counts even when the model calls it a company or place (two of them joined by "and")."""
    words = [fold(t.text) for t in doc[a:b]]
    span = doc[a:b].text
    if any(w in AMBIGUOUS for w in words) or EPONYMS.match(span) or words[0] in STREET_FIRST:
        return False  # "Jordan said", "Calvin Klein announced", "Rua Augusta is closed"
    last = words[-1]
    place = ORG_WORD.match(doc[b - 1].text) or PLACE_WORD.match(doc[b - 1].text)
    if b - a > 1 and place and last not in lexicon()[1]:
        return False  # "Lenin Square is", "Elizabeth Hospital has" ("Lois Lane is" stays)
    support = lexicon_support(span)
    if b - a == 1:
        # a clear given name the model does not call a company or place ("Santiago is
        # lovely", "Marcus offers 4.5%"); the model's labels of single unknown words are
        # noise ("Ngozi": ORG), so a pronoun or a second name may overrule it
        return support == 2 and (claimed or doc[a].ent_type_ not in _NOT_PERSON_ENT)
    # a full name the model does not call a place, company or product ("Sao Paulo": GPE)
    # with a word the lexicon knows ("Mercado Libre", "Google Pay" stay)
    unclaimed = all(t.ent_type_ not in _NOT_PERSON_ENT for t in doc[a:b])
    return support > 0 and unclaimed and all(t.tag_ in ("NNP", "NNPS") for t in doc[a:b])


def _referred_to_as_person(doc: Any, a: int, b: int, k: int) -> bool:
    """A one-word proper noun the next words call "he" or "she" ("when Oyinkansola calls,
    tell her ..."): a person, though the lexicon lacks the name; companies are "it", "they"."""
    words = [fold(t.text) for t in doc[a:b]]
    if b - a != 1 or any(w in AMBIGUOUS for w in words) or doc[a].tag_ not in ("NNP", "NNPS"):
        return False
    for tok in doc[k : min(len(doc), k + 12)]:
        if tok.lower_ in _PERSONAL_PRONOUNS:
            return True
        if tok.tag_ == "PRP$":
            return False  # "Konga delivered it to my neighbour, he signed": his or hers
    return False


def _beside_person(doc: Any, a: int, b: int) -> bool:
    """A proper noun joined to a person's name ("Kwame and Adjoa share ..."), that the model
    does not call a company or a place ("Kwame and Amazon")."""
    words = [fold(t.text) for t in doc[a:b]]
    return not any(w in AMBIGUOUS for w in words) and all(
        t.tag_ in ("NNP", "NNPS") and t.ent_type_ not in _NOT_PERSON_ENT for t in doc[a:b]
    )


def _lower_names(doc: Any) -> list[tuple[int, int]]:
    """Two or three lower-case words the name lexicon knows, after a preposition."""
    firsts, lasts = lexicon()
    spans = []
    for tok in doc:
        if tok.lower_ not in _PREPOSITIONS:
            continue
        j = tok.i + 1
        while j < len(doc) and j - tok.i <= 3 and _lower_name_word(doc[j], firsts, lasts):
            j += 1
        if j - tok.i - 1 >= 2 and any(fold(t.text) in firsts for t in doc[tok.i + 1 : j]):
            spans.append((doc[tok.i + 1].idx, doc[j - 1].idx + len(doc[j - 1])))
    return spans


def _lower_name_word(tok: Any, firsts: frozenset[str], lasts: frozenset[str]) -> bool:
    if not (tok.is_lower and tok.is_alpha):
        return False
    w = fold(tok.text)
    return (w in firsts or w in lasts) and w not in AMBIGUOUS and w not in STOP_WORDS
