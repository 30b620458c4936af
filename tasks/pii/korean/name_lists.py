"""The word lists Korean name detection leans on: surnames, the syllables given names are made
of, Faker's ``ko_KR`` person and address lists (a runtime dependency already: 121 given
names, 44 surnames, the cities, Seoul's districts, provinces and countries) and the words that
look like names but are not people.

Faker's lists are a shape signal, never proof on their own: ``지원`` (support), ``지연``
(delay), ``현지`` (local) and ``보람`` (reward) are given names in it and ordinary words in
every support chat, so a list hit still needs what surrounds it (see
:mod:`tasks.pii.korean.names`).
"""

from __future__ import annotations

from functools import lru_cache

from tasks.pii.lexicon import word_list

SURNAMES = "|".join(word_list("korean_name_lists_surnames"))
COMPOUND_SURNAMES = frozenset(s for s in SURNAMES.split("|") if len(s) == 2)
# syllables that make up most Korean given names; a surname + two of these is name-shaped
GIVEN = set("".join(word_list("korean_name_lists_given_syllables")))
# words kiwi tags as proper nouns or that look like a name but are not people
STOP = set(word_list("korean_name_lists_stop"))
# the ones a person is called by, not a person: "기사 님", "사장 님"
ROLE_WORDS = frozenset(word_list("korean_name_lists_role_words"))
# what Korean writes right after a name: a title or honorific, and a relative or friend
TITLES = "|".join(word_list("korean_titles"))
KIN = "|".join(word_list("korean_kin"))


@lru_cache(maxsize=1)
def faker_given_names() -> frozenset[str]:
    """Faker's ``ko_KR`` given names (male, female and both), Hangul."""
    from faker.providers.person.ko_KR import Provider

    names: set[str] = set()
    for attr in ("first_names", "first_names_male", "first_names_female"):
        names.update(getattr(Provider, attr, ()) or ())
    return frozenset(n for n in names if 2 <= len(n) <= 3)


@lru_cache(maxsize=1)
def place_words() -> frozenset[str]:
    """Places a name-shaped word may really be: Faker's ``ko_KR`` cities, districts,
    metropolitan cities, provinces and countries (with and without their 시/구/도 suffix)
    plus :data:`STOP`."""
    from faker.providers.address.ko_KR import Provider

    words: set[str] = set(STOP)
    for attr in ("cities", "boroughs", "metropolitan_cities", "provinces", "countries"):
        for place in getattr(Provider, attr, ()) or ():
            for part in place.split():
                words.add(part)
                for suffix in word_list("korean_name_lists_place_words"):
                    if part.endswith(suffix) and len(part) - len(suffix) >= 2:
                        words.add(part[: -len(suffix)])
    return frozenset(words)


def surname_split(stem: str) -> tuple[str, str] | None:
    """``(surname, given)`` of a Hangul full name, or ``None`` when it does not start with a
    surname (compound surnames first: ``남궁민`` is 남궁 + 민)."""
    if len(stem) >= 3 and stem[:2] in COMPOUND_SURNAMES:
        return stem[:2], stem[2:]
    if 3 <= len(stem) <= 4 and stem[0] in SURNAMES.split("|"):
        return stem[0], stem[1:]
    return None
