"""Generated training text for the learned Korean name layer (no line of any test set).

Each example is a text and the character spans of the people's names in it, as in
:mod:`tasks.pii.learned.data`. Texts come from the templates of
``lexicon/learned_templates_ko.txt`` (chat, e-mail, forms, support notes, names beside
companies, streets and products, and texts with no name at all, where words that look like
names but are not, 지원, 지연, 현지, 보람, 고객님, 기사님, stand, and where ordinary nouns stand in
a name's slots) and from tool results written as
JSON and CSV with Korean and English keys. A name is written as Koreans write it: the full name,
the given name alone, the surname before a title (``김 과장님``), with the particles, honorifics
and the familiar ``이`` glued on (``김민수님``, ``민수씨``, ``민준이가``, ``지수야``); only the
name itself is tagged. A share of the chat and note texts (:data:`TIGHT_SHARE`) is written
without spaces between words, as quick chat often is.

Names come from two sources: Faker's ``ko_KR`` person provider (44 surnames, 121 given names)
and names composed from the project's surname list and the syllables Korean given names are
made of (``lexicon/korean_name_lists_surnames.txt``, ``korean_name_lists_given_syllables.txt``;
two syllables, as most given names are), so the layer meets given names beyond Faker's short
list. The ordinary nouns (``lexicon/learned_nouns_ko.txt``, the 3,000 most frequent two- and
three-syllable common nouns of kiwipiepy's model) fill the topics and the name-free texts'
slots: a layer trained from scratch that met new words only as names would take every word it
has not seen for one. Everything is drawn from one seeded ``random.Random`` and a seeded Faker instance.
"""

from __future__ import annotations

import random
from functools import cache
from typing import Any

import regex as re

from tasks.pii.learned.data import Example, tool_result
from tasks.pii.lexicon import word_list

NEGATIVE_SHARE = 0.3  # of the examples: texts with no name (the "neg" templates)
STRUCTURED_SHARE = 0.15  # of the examples: JSON and CSV tool results
TIGHT_SHARE = 0.1  # of the named chat and note texts: written without spaces
COMPOSED_SHARE = 0.5  # of the people: names composed from the surname and syllable lists
TAGGED = frozenset({"name", "given", "last"})
TYPED = {"company": "ORG", "street": "FAC", "city": "GPE", "product": "PRODUCT"}
_FIELD = re.compile(r"\{(~?\w+)\}")
_FIELD_OF_KEY = {"회사": "company", "도시": "city", "도로명": "street", "상품": "product"}


@cache
def _templates() -> tuple[tuple[str, str], ...]:
    rows = (line.split("|", 1) for line in word_list("learned_templates_ko"))
    return tuple((shape, tpl.replace("\\n", "\n")) for shape, tpl in rows)


@cache
def _particles() -> dict[str, tuple[str, str]]:
    rows = (line.split("|") for line in word_list("learned_particles_ko"))
    return {marker: (closed, open_) for marker, closed, open_ in rows}


@cache
def _surnames() -> tuple[str, ...]:
    return word_list("korean_name_lists_surnames")


@cache
def _syllables() -> tuple[str, ...]:
    return tuple(sorted(set("".join(word_list("korean_name_lists_given_syllables")))))


def final_consonant(text: str) -> bool:
    """Whether the last Hangul syllable of ``text`` ends in a consonant (its 받침)."""
    last = text[-1:] if text else ""
    return "가" <= last <= "힣" and (ord(last) - 0xAC00) % 28 != 0


def particle(marker: str, before: str) -> str:
    """The form of a particle (``은``/``는`` for marker ``은``) that follows ``before``."""
    closed, open_ = _particles()[marker]
    return closed if final_consonant(before) else open_


class _Names:
    """Seeded name and filler sources."""

    def __init__(self, rng: random.Random, seed: int) -> None:
        from faker import Faker

        self.rng = rng
        self.fake = Faker("ko_KR")
        self.fake.seed_instance(seed)

    def person(self) -> tuple[str, str]:
        """A (surname, given name) pair."""
        if self.rng.random() < COMPOSED_SHARE:
            given = "".join(self.rng.choice(_syllables()) for _ in range(2))
            return self.rng.choice(_surnames()), given
        return self.fake.last_name(), self.fake.first_name()

    def fill(self, field: str, people: dict[str, tuple[str, str]]) -> str:
        """The text of one template field."""
        who = people["2" if field.endswith("2") else "1"]
        values = {
            "name": lambda: who[0] + who[1],
            "given": lambda: who[1],
            "last": lambda: who[0],
            "title": lambda: self.rng.choice(word_list("learned_titles_ko")),
            "company": self.fake.company,
            "street": self.fake.street_name,
            "city": self.fake.city,
            "product": lambda: self.rng.choice(word_list("learned_products_ko")),
            "topic": lambda: self.rng.choice(
                word_list("learned_topics_ko" if self.rng.random() < 0.5 else "learned_nouns_ko")
            ),
            "noun": lambda: self.rng.choice(word_list("learned_nouns_ko")),
            "num": lambda: str(self.rng.randint(2, 99999)),
            "day": lambda: self.rng.choice(word_list("learned_days_ko")),
        }
        return values[field.rstrip("2")]()


def _from_template(names: _Names, shape: str, template: str, *, tight: bool) -> Example:
    people = {"1": names.person(), "2": names.person()}
    text, spans, others, at = "", [], [], 0
    for m in _FIELD.finditer(template):
        field = m.group(1)
        piece = template[at : m.start()]
        text += piece.replace(" ", "") if tight else piece
        at = m.end()
        if field.startswith("~"):
            text += particle(field[1:], text)
            continue
        value = names.fill(field, people)
        start = len(text)
        text += value
        if field.rstrip("2") in TAGGED:
            spans.append((start, len(text)))
        elif field.rstrip("2") in TYPED:
            others.append((start, len(text), TYPED[field.rstrip("2")]))
    text += template[at:].replace(" ", "") if tight else template[at:]
    return Example(text, tuple(spans), "tight" if tight else shape, tuple(others))


def _structured(names: _Names) -> Example:
    rng = names.rng
    name_keys = rng.sample(word_list("learned_name_keys_ko"), rng.randint(1, 2))
    other_keys = rng.sample(word_list("learned_other_keys_ko"), rng.randint(1, 3))
    rows = []
    for _ in range(rng.randint(1, 3)):
        row: dict[str, Any] = {}
        for key in rng.sample([*name_keys, *other_keys], len(name_keys) + len(other_keys)):
            people = {"1": names.person(), "2": names.person()}
            field = "name" if key in name_keys else _FIELD_OF_KEY.get(key, "topic")
            row[key] = names.fill(field, people)
        row["id"] = rng.randint(1, 9999)
        rows.append(row)
    tagged = [str(row[k]) for row in rows for k in name_keys]
    typed = {
        str(row[k]): TYPED[_FIELD_OF_KEY[k]]
        for row in rows
        for k in other_keys
        if k in _FIELD_OF_KEY
    }
    return tool_result(rng, rows, tagged, typed)


def generate(n: int, seed: int = 0) -> list[Example]:
    """``n`` examples drawn with ``seed`` (the same seed gives the same list)."""
    rng = random.Random(seed)
    names = _Names(rng, seed)
    negative = [t for t in _templates() if t[0] == "neg"]
    named = [t for t in _templates() if t[0] != "neg"]
    out = []
    for _ in range(n):
        draw = rng.random()
        if draw < NEGATIVE_SHARE:
            out.append(_from_template(names, *rng.choice(negative), tight=False))
        elif draw < NEGATIVE_SHARE + STRUCTURED_SHARE:
            out.append(_structured(names))
        else:
            shape, template = rng.choice(named)
            tight = shape in ("chat", "note") and rng.random() < TIGHT_SHARE
            out.append(_from_template(names, shape, template, tight=tight))
    return out
