"""Generated training text for the learned English name layer (no line of any test set).

Each example is a text and the character spans of the people's names in it. Texts come from
the templates of ``lexicon/learned_templates_en.txt`` (chat, lower-case chat, e-mail greetings
and sign-offs, support notes, forms, names beside companies, streets and products, and texts
with no name at all) and from tool results written as JSON and CSV with name and non-name
fields. Names come from Faker's person providers of every locale whose names are written in
the Latin alphabet, plus the romanised providers where Faker has them (Japanese, Chinese);
other locales are skipped. Companies, streets, cities and products are never tagged: streets
and companies often carry a surname ("Smith Street", "Jones LLC") and must stay. A stated share
of the examples (:data:`NEGATIVE_SHARE`) is PII-free text. Everything is drawn from one seeded
``random.Random`` and seeded Faker instances, so a seed gives the same examples.
"""

from __future__ import annotations

import csv
import io
import json
import random
from dataclasses import dataclass
from functools import cache
from typing import Any

import regex as re

from tasks.pii.lexicon import word_list

NEGATIVE_SHARE = 0.25  # of the examples: texts with no name (the "neg" templates)
STRUCTURED_SHARE = 0.15  # of the examples: JSON and CSV tool results
LOWER_SHARE = 0.1  # of the named template texts: written all in lower case
ROMANISED = ("ja_JP", "zh_CN", "zh_TW")  # Faker's romanised person providers
TITLES = word_list("learned_titles_en")
DAYS = word_list("learned_days_en")
TAGGED = frozenset({"name", "name2", "first", "first2", "last"})
# the other fields, typed as the source model's labels so that it keeps telling them apart
TYPED = {"company": "ORG", "street": "FAC", "city": "GPE", "product": "PRODUCT"}
_FIELD = re.compile(r"\{(\w+)\}")
_LATIN = re.compile(r"^[\p{Latin}\s.'’-]+$")


@dataclass(frozen=True)
class Example:
    """One generated text, the ``(start, end)`` spans of the names in it, its shape, and the
    ``(start, end, label)`` spans of its companies (ORG), streets (FAC), cities (GPE) and
    products (PRODUCT)."""

    text: str
    names: tuple[tuple[int, int], ...]
    shape: str
    others: tuple[tuple[int, int, str], ...] = ()


@cache
def _templates() -> tuple[tuple[str, str], ...]:
    rows = (line.split("|", 1) for line in word_list("learned_templates_en"))
    return tuple((shape, tpl.replace("\\n", "\n")) for shape, tpl in rows)


@cache
def name_locales() -> tuple[str, ...]:
    """Faker's locales whose person names are in the Latin alphabet (checked on a sample),
    then the romanised ones."""
    import warnings

    from faker import Faker
    from faker.config import AVAILABLE_LOCALES

    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated locale aliases
        for loc in sorted(AVAILABLE_LOCALES):
            if loc in ROMANISED or loc.endswith("_QC"):
                continue
            fake = Faker(loc)
            fake.seed_instance(0)
            sample = [fake.first_name() + " " + fake.last_name() for _ in range(20)]
            if all(_LATIN.match(s) for s in sample):
                out.append(loc)
    return (*out, *ROMANISED)


class _Names:
    """Seeded name and filler sources over every name locale."""

    def __init__(self, rng: random.Random, seed: int) -> None:
        from faker import Faker

        self.rng = rng
        self.fakers = {loc: Faker(loc) for loc in name_locales()}
        for n, fake in enumerate(self.fakers.values()):
            fake.seed_instance(seed * 1000 + n)
        # not it_IT: it draws its cities from a set, in another order in each process
        self.places = Faker(["en_US", "en_GB", "de_DE", "fr_FR", "es_ES"])
        self.places.seed_instance(seed)

    def person(self) -> tuple[str, str]:
        """A (given name, surname) pair of one locale."""
        loc = self.rng.choice(list(self.fakers))
        fake = self.fakers[loc]
        if loc in ROMANISED:
            return fake.first_romanized_name(), fake.last_romanized_name()
        return fake.first_name(), fake.last_name()

    def fill(self, field: str, people: dict[str, tuple[str, str]]) -> str:
        """The text of one template field."""
        who = people["2" if field.endswith("2") else "1"]
        values = {
            "name": lambda: f"{who[0]} {who[1]}",
            "first": lambda: who[0],
            "last": lambda: who[1],
            "title": lambda: self.rng.choice(TITLES),
            "company": self.places.company,
            "street": self.places.street_name,
            "city": self.places.city,
            "product": lambda: self.rng.choice(word_list("learned_products_en")),
            "topic": lambda: self.rng.choice(word_list("learned_topics_en")),
            "num": lambda: str(self.rng.randint(2, 99999)),
            "day": lambda: self.rng.choice(DAYS),
        }
        return values[field.rstrip("2")]()


def _from_template(names: _Names, shape: str, template: str, *, lower: bool) -> Example:
    people = {"1": names.person(), "2": names.person()}
    text, spans, others, at = "", [], [], 0
    for m in _FIELD.finditer(template):
        field = m.group(1)
        value = names.fill(field, people)
        piece = template[at : m.start()]
        text += piece.lower() if lower else piece
        start = len(text)
        text += value.lower() if lower else value
        if field in TAGGED:
            spans.append((start, len(text)))
        elif field.rstrip("2") in TYPED:
            skip = 4 if value.startswith("the ") else 0  # "the Orbit app": "Orbit app"
            others.append((start + skip, len(text), TYPED[field.rstrip("2")]))
        at = m.end()
    text += template[at:].lower() if lower else template[at:]
    return Example(text, tuple(spans), "lower" if lower else shape, tuple(others))


def _structured(names: _Names) -> Example:
    rng = names.rng
    name_keys = rng.sample(word_list("learned_name_keys_en"), rng.randint(1, 2))
    other_keys = rng.sample(word_list("learned_other_keys_en"), rng.randint(1, 3))
    rows = []
    for _ in range(rng.randint(1, 3)):
        row: dict[str, Any] = {}
        for key in rng.sample([*name_keys, *other_keys], len(name_keys) + len(other_keys)):
            people = {"1": names.person(), "2": names.person()}
            row[key] = names.fill("name" if key in name_keys else _other(key), people)
        row["id"] = rng.randint(1, 9999)  # last: "3163,Gina Kim" is one token to spaCy
        rows.append(row)
    tagged = [str(row[k]) for row in rows for k in name_keys]
    typed = {str(row[k]): TYPED[k] for row in rows for k in other_keys if k in TYPED}
    return tool_result(rng, rows, tagged, typed)


def tool_result(
    rng: random.Random, rows: list[dict[str, Any]], tagged: list[str], typed: dict[str, str]
) -> Example:
    """``rows`` as a tool result, JSON or CSV at random: the ``tagged`` values are the names,
    the ``typed`` ones (value -> label) what else the text holds (both languages' generators)."""
    if rng.random() < 0.5:
        text, shape = json.dumps(rows if len(rows) > 1 else rows[0], ensure_ascii=False), "json"
    else:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        text, shape = buf.getvalue().rstrip("\n"), "csv"
    spans = _find_all(text, tagged)
    others = tuple(
        (s, e, typed[text[s:e]])
        for s, e in _find_all(text, list(typed))
        if not any(s < end and e > start for start, end in spans)
    )
    return Example(text, spans, shape, others)


def _other(key: str) -> str:
    return {"status": "topic"}.get(key, key)


def _find_all(text: str, values: list[str]) -> tuple[tuple[int, int], ...]:
    """Every occurrence of each value, as whole words (sorted, overlaps dropped)."""
    spans: list[tuple[int, int]] = []
    for value in dict.fromkeys(values):
        for m in re.finditer(rf"(?<!\w){re.escape(value)}(?!\w)", text):
            if not any(m.start() < e and m.end() > s for s, e in spans):
                spans.append((m.start(), m.end()))
    return tuple(sorted(spans))


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
            out.append(_from_template(names, *rng.choice(negative), lower=False))
        elif draw < NEGATIVE_SHARE + STRUCTURED_SHARE:
            out.append(_structured(names))
        else:
            shape, template = rng.choice(named)
            lower = shape == "lower" or rng.random() < LOWER_SHARE
            out.append(_from_template(names, shape, template, lower=lower))
    return out
