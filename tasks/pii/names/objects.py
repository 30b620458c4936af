"""Names no cue word announces, found by the name beside them or the slot they fill:

- a name joined to a person's name ("from Kwabena Asante to Selamawit Haile", "Yaw Boateng
  and Nkechi Anyanwu"): two or three capitalised words, none an ordinary or ambiguous name
  word, beside a name the lexicon clearly knows, whatever the model calls them (it calls
  unknown African, Amharic or Sri Lankan names ORG);
- a given name and a surname that are both also words or places ("Sterling Bell", "Dallas
  Price", "Jordan Banks"), where a person stands: after an agent's "by" ("escalated by"),
  as the object of a verb done to people ("refunded", "emailed", "cc"), or as the subject of
  a verb ("Austin Meadows left a review"); "Sterling Bank", "Dallas Cowboys" stay (no surname);
- a lower-case name typed in a hurry in a person's slot ("spoke to tunde", "refund for
  chidinma okafor", "ifeoma says"): one word the lexicon knows as a given name, or two words
  of which one is a known given name and the other no English function word.
"""

from __future__ import annotations

from typing import Any

from tasks.pii.lexicon import STOP_WORDS, word_list
from tasks.pii.names import (
    AMBIGUOUS,
    EPONYMS,
    ORG_WORD,
    STREET_FIRST,
    fold,
    lexicon,
    lexicon_support,
)
from tasks.pii.names.subjects import name_run
from tasks.pii.names.titles import in_title_list
from tasks.pii.names.vocabulary import unseen

_JOINERS = frozenset(["and", "&", "or"])
# verbs done to a person: the proper noun after them is one ("refunded Dallas Price")
_PERSON_VERBS = frozenset(word_list("name_objects_person_verbs"))
# words after which a lower-case name stands ("spoke to tunde", "refund for ...", "under")
_LOWER_SLOT = frozenset(word_list("name_objects_lower_slot"))
_SPEECH = frozenset(word_list("name_objects_speech"))
_NOT_PERSON_ENT = frozenset(
    ["GPE", "LOC", "FAC", "NORP", "PRODUCT", "WORK_OF_ART", "EVENT", "LAW", "DATE", "TIME"]
)


def object_name_spans(text: str, nlp_artifacts: Any) -> list[tuple[int, int]]:
    """The names of the module docstring in ``text`` (spaCy's tokens needed)."""
    doc = getattr(nlp_artifacts, "tokens", None)
    if doc is None or not len(doc):
        return []
    spans = _coordinated(doc) + _both_known(doc) + _lower_slot_names(doc) + _unseen_runs(doc)
    found = [(doc[a].idx, doc[b - 1].idx + len(doc[b - 1])) for a, b in spans]
    return [(s, e) for s, e in found if not in_title_list(text, s, e)]


def _run(doc: Any, i: int) -> int:
    """The end of one to three capitalised name words at ``i`` (``i``: none)."""
    return name_run(doc, i, _name_word)


def _name_word(tok: Any) -> bool:  # beyond capitalised: no ambiguous, firm or street word
    text = tok.text
    return (
        fold(text) not in AMBIGUOUS and not ORG_WORD.match(text) and fold(text) not in STREET_FIRST
    )


def _clear_person(doc: Any, a: int, b: int) -> bool:
    """A run the lexicon clearly knows as a name (a clear given name in it)."""
    span = doc[a:b].text
    return not EPONYMS.match(span) and lexicon_support(span) == 2


def _coordinated(doc: Any) -> list[tuple[int, int]]:
    """Runs joined by "and"/"or" (or "from A to B") to a clearly known name."""
    found = []
    i = 0
    while i < len(doc):
        j = _run(doc, i)
        if j == i:
            i += 1
            continue
        if j + 1 < len(doc) and _joins(doc, i, j):
            k = _run(doc, j + 1)
            if k > j + 1 and (k == len(doc) or not _name_like_after(doc[k])):
                first, second = (i, j), (j + 1, k)
                if _clear_person(doc, *first) and _beside(doc, *second):
                    found.append(second)
                elif _clear_person(doc, *second) and _beside(doc, *first):
                    found.append(first)
                i = k
                continue
        i = j
    return found


def _joins(doc: Any, i: int, j: int) -> bool:
    word = doc[j].lower_
    return word in _JOINERS or (word == "to" and i > 0 and doc[i - 1].lower_ == "from")


def _name_like_after(tok: Any) -> bool:
    """A word after a run that makes it a company's or a place's ("... Bank", "'s")."""
    return bool(tok.text[:1].isupper() or tok.text in ("'s", "’s", "&"))


def _beside(doc: Any, a: int, b: int) -> bool:
    """A full name's shape beside a person: two or three proper nouns, or one the model
    does not call a place or product (it calls unknown names ORG: that is noise here)."""
    if EPONYMS.match(doc[a:b].text):
        return False
    if b - a == 1:
        return doc[a].tag_ in ("NNP", "NNPS") and doc[a].ent_type_ not in _NOT_PERSON_ENT | {"ORG"}
    return all(t.tag_ in ("NNP", "NNPS", "NN") for t in doc[a:b]) and not any(
        t.ent_type_ in _NOT_PERSON_ENT for t in doc[a:b]
    )


def _both_known(doc: Any) -> list[tuple[int, int]]:
    """A known given name and a known surname, ambiguous words allowed, in a person's slot."""
    firsts, lasts = lexicon()
    found = []
    for i in range(len(doc) - 1):
        one, two = doc[i], doc[i + 1]
        if not (_titled(one) and _titled(two)) or (i > 0 and _titled(doc[i - 1])):
            continue
        if i + 2 < len(doc) and _name_like_after(doc[i + 2]):
            continue
        if fold(one.text) not in firsts | AMBIGUOUS or fold(two.text) not in lasts:
            continue
        if EPONYMS.match(f"{one.text} {two.text}") or ORG_WORD.match(two.text):
            continue
        if _person_slot_before(doc, i) or _verb_after(doc, i + 2):
            found.append((i, i + 2))
    return found


def _titled(tok: Any) -> bool:
    return bool(tok.text[:1].isupper() and tok.text[1:].islower() and tok.is_alpha)


def _person_slot_before(doc: Any, i: int) -> bool:
    if i == 0:
        return False
    before = doc[i - 1]
    if before.lower_ in _PERSON_VERBS:
        return True
    return before.lower_ == "by" and i > 1 and doc[i - 2].tag_ == "VBN"


def _verb_after(doc: Any, k: int) -> bool:
    """The run opens its clause and a finite verb follows it (maybe after an adverb)."""
    start = k - 2
    if start > 0 and not (doc[start - 1].is_space or doc[start - 1].text in ".!?;,:"):
        return False
    while k < len(doc) and doc[k].tag_ == "RB" and doc[k].is_lower:
        k += 1
    return k < len(doc) and doc[k].tag_ in ("VBD", "VBZ", "MD") and doc[k].is_lower


def _lower_slot_names(doc: Any) -> list[tuple[int, int]]:
    """Lower-case names after a person's slot word or before a verb of speech."""
    firsts, lasts = lexicon()
    found = []
    for i, tok in enumerate(doc):
        if not _lower_word(tok):
            continue
        if i > 0 and _lower_word(doc[i - 1]):
            continue  # inside a run already judged
        j = i + 1
        if j < len(doc) and _lower_word(doc[j]) and not _lower_word_at(doc, j + 1):
            j += 1
        words = [fold(t.text) for t in doc[i:j]]
        strange = [_unseen_name(t) for t in doc[i:j]]
        pair = j - i == 2
        if not any(w in firsts or (pair and w in lasts) for w in words):
            # words the model never met ("tendai moyo"): a pair both of them, or one alone
            # where only a person stands
            # and the tagger reads one as a proper noun ("doorbell firmware" stays)
            proper = any(t.tag_ in ("NNP", "NNPS", "FW") for t in doc[i:j])
            if not proper or not (
                all(strange)
                if pair
                else strange[0] and _strong_slot(doc, i) and _called_person(doc, j)
            ):
                continue
        before = doc[i - 1] if i > 0 else None
        slot = (
            before is not None
            and before.is_lower  # "my Ring doorbell" is a brand's
            and (before.lower_ in _LOWER_SLOT or before.lower_ in _PERSON_VERBS)
        )
        speech = j < len(doc) and doc[j].lower_ in _SPEECH and (i == 0 or not doc[i - 1].is_alpha)
        # a given name that is also a word ("apply for job", "donate for charity") counts
        # after "to"/"for" only when the model never met it or tags it a proper noun
        plain = not (strange[0] or doc[i].tag_ in ("NNP", "NNPS")) and not _strong_slot(doc, i)
        if j - i == 1 and not (
            (words[0] in firsts or strange[0]) and (speech or slot and not plain)
        ):
            continue
        named = all(w in firsts or w in lasts or x for w, x in zip(words, strange, strict=True))
        if j - i == 2 and not (slot and named and _boundary_after(doc, j)):
            continue  # "apply for job openings" stays
        found.append((i, j))
    return found


def _lower_word(tok: Any) -> bool:
    """A lower-case word that may be a name: not a function word, an ambiguous name word, or
    a verb's or adverb's ending."""
    w = tok.text
    return bool(
        w.isalpha()
        and w.islower()
        and len(w) >= 3
        and w not in STOP_WORDS
        and fold(w) not in AMBIGUOUS
        and not w.endswith(("ing", "ed", "ly"))
        and (
            tok.tag_ in ("NN", "NNS", "NNP", "NNPS", "JJ", "FW") or tok.tag_ == "VB" and unseen(tok)
        )
        and w not in _LOWER_SLOT
        and tok.ent_type_ not in _NOT_PERSON_ENT
    )


def _lower_word_at(doc: Any, k: int) -> bool:
    return k < len(doc) and _lower_word(doc[k])


def _boundary_after(doc: Any, k: int) -> bool:
    """The end, punctuation, or a function word, verb or adverb after a two-word name."""
    if k >= len(doc):
        return True
    tok = doc[k]
    return bool(
        tok.is_punct
        or tok.is_space
        or tok.lower_ in STOP_WORDS
        or tok.tag_[:2] in ("VB", "RB", "MD")
    )


# where only a person stands: "spoke to ...", "tell ...", "cc ...", "refund ..."
_TALKED = frozenset(word_list("name_objects_talked"))


def _strong_slot(doc: Any, i: int) -> bool:
    if i == 0 or not doc[i - 1].is_lower:
        return False
    before = doc[i - 1].lower_
    if before in _PERSON_VERBS or before in ("tell", "ask", "cc"):
        return True
    return before in ("to", "with") and i > 1 and doc[i - 2].lower_ in _TALKED


def _unseen_name(tok: Any) -> bool:
    """A word the model never met that could be a name: letters with a vowel, no
    abbreviation ("pls", "thx")."""
    w = tok.text
    return bool(unseen(tok) and len(w) >= 3 and any(c in "aeiouy" for c in w.lower()))


# a place's preposition before a run ("in Osu Badu", "near Ikota Ajah"): a place, not a name
_PLACE_PREPOSITIONS = frozenset(word_list("name_objects_place_prepositions"))


def _unseen_runs(doc: Any) -> list[tuple[int, int]]:
    """Two or three capitalised words the model never met, or the lexicon's names among
    them ("Priyanka Jayawardena needs a copy", "Folake Adeyinka rang"), that the model does
    not call a place, product or date and no place preposition or company word frames."""
    firsts, lasts = lexicon()
    found = []
    i = 0
    while i < len(doc):
        j = _run(doc, i)
        if j - i < 2:
            i = max(j, i + 1)
            continue
        run = doc[i:j]
        strange = [_unseen_name(t) for t in run]
        known = [fold(t.text) in firsts or fold(t.text) in lasts for t in run]
        if (
            any(strange)
            and all(s or k for s, k in zip(strange, known, strict=True))
            and all(t.tag_ in ("NNP", "NNPS", "NN") for t in run)
            and not any(t.ent_type_ in _NOT_PERSON_ENT for t in run)
            and not (i > 0 and doc[i - 1].lower_ in _PLACE_PREPOSITIONS)
            and not (i > 0 and fold(doc[i - 1].text) in STREET_FIRST)  # "Rua Oscar Freire"
            and not (i > 0 and doc[i - 1].tag_ in ("DT", "PRP$"))  # "my Oneplus Nord"
            and not (j < len(doc) and (_name_like_after(doc[j]) or _common_noun(doc[j])))
            # the model calls it a company: only where a person stands ("cc Wanjiru Kamau",
            # "Ama Serwaa said she ..."; "Supabase Auth rejects the link" stays)
            and (
                not any(t.ent_type_ == "ORG" for t in run)
                or _strong_slot(doc, i)
                or _called_person(doc, j)
            )
            and not EPONYMS.match(run.text)
        ):
            found.append((i, j))
        i = j
    return found


def _common_noun(tok: Any) -> bool:
    """A lower-case noun after a run makes the run its modifier ("Injera Tibs platter")."""
    return bool(tok.tag_ in ("NN", "NNS") and tok.is_lower)


def _called_person(doc: Any, k: int) -> bool:
    """The words after ``k`` call someone "he" or "she", or speak ("says", "said")."""
    if k < len(doc) and doc[k].lower_ in _SPEECH:
        return True
    return any(t.lower_ in ("he", "she", "him", "her") for t in doc[k : k + 12])
