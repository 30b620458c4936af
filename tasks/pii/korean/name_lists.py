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

SURNAMES = (
    "남궁|황보|제갈|선우|독고|사공|서문|"
    "김|이|박|최|정|강|조|윤|장|임|한|오|서|신|권|황|안|송|전|홍|유|고|문|양|손|배|백|허|남|"
    "심|노|하|곽|성|차|주|우|구|민|류|나|진|지|엄|채|원|천|방|공|현|함|변|염|여|추|도|소|석|"
    "선|설|마|길|연|위|표|명|기|반|라|왕|금|옥|육|인|맹|제|모|탁|국|어|은|편|용|예|경|봉|사|부|"
    "가|복|태|목|형|피|두|감|음|빈|동|온|호|범|좌|팽|승|간|상|갈|단|견|당|리|로|임"
)
COMPOUND_SURNAMES = frozenset(s for s in SURNAMES.split("|") if len(s) == 2)
# syllables that make up most Korean given names; a surname + two of these is name-shaped
GIVEN = set(
    "민서지현수준우영정연은진하윤예원성호재유주희아혜경동상석훈철미숙순자명혁빈나다채소시태용"
    "승규선형기남옥란애화인일한건환찬율린솔람결온도범종욱웅택식근길봉춘덕복분례임향금령의보"
    "국광창효완청열균섭엽표필학해홍후휘겸곤구랑려륜리림별봄빛산새샘설세슬신안양오요운월위융"
    "을익중치탁평항협황흠강교권늘바담대돈두래량렬록루룡름만매면모무문미배백벽병삼송실심여옥라가"
    "말순검니엘"
)
# words kiwi tags as proper nouns or that look like a name but are not people
STOP = set(word_list("korean_name_lists_stop"))
# the ones a person is called by, not a person: "기사 님", "사장 님"
ROLE_WORDS = frozenset(word_list("korean_name_lists_role_words"))


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
