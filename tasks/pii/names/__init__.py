"""English and romanised names: the lexicon, the corroboration a model's name hit needs, and
the places names sit whatever the model says (mail headers, JSON and form fields, airline
``SMITH/JOHN MR`` style, romanised Korean names).

spaCy's small English model calls brands, products and brokers PERSON ("my Pixel 7a",
"Flight UA 1432", "from Schwab"). A model or proper-noun hit is kept only when something
corroborates it (:func:`corroborated`): a cue before or after it (a title, "my name is",
"From:", "Dear", "passenger", "my wife"), or a known given name or surname in it. The
lexicon is Faker's name lists (a runtime dependency already, ~10,000 given names and ~12,000
surnames over 44 locales, no download) plus the common romanised Korean surnames. A word
that is also an ordinary word, a place or a brand ("Chase", "Jordan", "Will") counts only
with a cue or beside another name word; eponymous companies ("Charles Schwab", "Wells
Fargo") are never a person.
"""

from __future__ import annotations

import importlib
import unicodedata
from functools import lru_cache
from typing import Any

import regex as re

from tasks.pii.lexicon import alternatives, word_list
from tasks.pii.names.romanise import greek, latin
from tasks.pii.names.titles import in_title_list

_LOCALES = list(word_list("names_locales"))
KOREAN_SURNAMES = frozenset(word_list("names_korean_surnames"))
# given names that are also ordinary words, places or brands: a name only with support
# lower-case words inside a name ("van der Dussen", "de Lacy", "Dos Santos", "bin Salman")
NAME_PARTICLES = frozenset(word_list("names_name_particles"))
AMBIGUOUS = frozenset(word_list("names_ambiguous"))
# who a letter greets when it greets no one by name
NOT_GREETED = frozenset(word_list("names_not_greeted"))
# what opens a reply or a greeting, never a name ("yes", "thanks", "sure", "hi")
REPLIES = frozenset(word_list("greetings_not_names"))
# companies and brands named after people (brokers, banks, and fashion, beauty, food and
# drink houses that carry their founder's full name): never a person in a text
EPONYMS = re.compile(r"(?i)^(?:" + alternatives("names_eponyms") + ")$")
# the words of a self-introduction or an address before a name (also the fallback's cue,
# tasks.pii.ner.spacy_names._NAME_CUE)
SELF_INTRODUCTION = r"my\s+name\s+is|this\s+is|i'?m|i\s+am|call\s+me|dear"
_SELF_INTRO = re.compile(rf"(?i)\b(?:{SELF_INTRODUCTION}|mr|mrs|ms|dr)\.?[ \t]*[:,]?[ \t]*$")
_CALENDAR = frozenset(word_list("names_calendar"))
# the word for "street" or "square" before a street's name, in the lexicon's languages
STREET_FIRST = frozenset(word_list("names_street_first"))
_DETERMINERS = frozenset(word_list("names_determiners"))
# an organisation's, a building's or a street's word after a name, then a product or service
# after a brand ("Marriott Bonvoy card", "Sapphire Reserve app")
_ORG_AFTER = re.compile(
    r"(?i)^[ \t]*(?:"
    + alternatives("names_org_words")
    + "|"
    + alternatives("names_org_products")
    + ")"
)
# one word of an organisation's name ("Bank" of "Bank of America")
ORG_WORD = re.compile(r"(?i)^(?:" + _ORG_AFTER.pattern.split("(?:", 1)[1] + "$")
# a title, greeting, sign-off, introduction, role or relation word before a name, or a
# mail header's field
_CUE_BEFORE = re.compile(
    r"(?i)(?:\b(?:"
    + alternatives("names_cues_before")
    + r")\.?[\s,:]*[\"'(]?|(?:from|to|cc|bcc)\s*:\s*[\"']?)$"
)
# a dash before a name is a sign-off when the name ends the message, not a bullet's dash
_DASH_BEFORE = re.compile(r"[-–—]\s*$")
_BULLET_LINE = re.compile(r"(?m)^[ \t]*[-–—*•][^\n]*\n[ \t]*[-–—*•][^\n]*$")
# an address or a verb of speech after a name, or a role after a comma ("Dana Lee, the
# manager")
_CUE_AFTER = re.compile(
    r"(?i)^(?:\s*<[^>\s]+@|\s*\([^)]*@|"
    + "".join(rf"\s+{w}\b|" for w in word_list("names_speech_verbs"))
    + r"\s+(?:is|was)\s+(?:my|our|the)\s+\w+|,\s*(?:the\s+)?(?:"
    + alternatives("names_roles_after")
    + r")\b)"
)


_INITIALS_SURNAME = re.compile(r"^(?:\p{Lu}\.[ \t]?){1,3}\p{Lu}[\p{L}'’-]+$")


@lru_cache(maxsize=1)
def lexicon() -> tuple[frozenset[str], frozenset[str]]:
    """Known given names and surnames, lower-cased without diacritics (Faker's person lists,
    Latin script)."""
    firsts: set[str] = set()
    lasts: set[str] = set()
    for locale in _LOCALES:
        try:
            provider = importlib.import_module(f"faker.providers.person.{locale}").Provider
        except ImportError:
            continue
        cyrillic = locale in ("ru_RU", "uk_UA", "bg_BG")
        for attr, into in (
            ("first_names", firsts),
            ("first_names_male", firsts),
            ("first_names_female", firsts),
            ("first_romanized_names", firsts),
            ("last_names", lasts),
            ("last_romanized_names", lasts),
        ):
            listed = getattr(provider, attr, None)
            if not isinstance(listed, (list, tuple, dict)):
                continue  # absent, or a property some locales compute
            names = [latin(n) if cyrillic else greek(n) if locale == "el_GR" else n for n in listed]
            # "Aurélie" -> "aurelie", "Çelik" -> "celik", "O'Connor" -> "oconnor"
            folded = (fold(n).replace("'", "").replace("’", "") for n in names)
            into.update(n for n in folded if n.isascii() and n.isalpha())
    lasts.update(KOREAN_SURNAMES)
    from tasks.pii.lexicon import STOP_WORDS

    # romanised Vietnamese and Chinese given names include "My", "An", "Do": not names here
    common = {w for w in STOP_WORDS} | {w for w in firsts | lasts if len(w) < 3}
    return frozenset(firsts - common), frozenset(lasts - common)


def fold(word: str) -> str:
    """A word without diacritics, lower-cased (``Lefèvre`` -> ``lefevre``: the lexicon's and
    its look-ups' form)."""
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


def _words(span: str) -> list[str]:
    """The span's words as the lexicon holds them (``D'Arcy`` -> ``darcy``)."""
    words = [fold(w) for w in re.findall(r"\p{L}[\p{L}'’]*", span)]
    return [w.replace("'", "").replace("’", "") if w[-2:] not in ("'s", "’s") else w for w in words]


def lexicon_support(span: str) -> int:
    """0: no name word; 1: only words that are also ordinary words or surnames alone; 2: a
    clear given name, or a clear surname beside a given name."""
    firsts, lasts = lexicon()
    words = [w.removesuffix("'s").removesuffix("’s") for w in _words(span)]
    known = [w for w in words if w in firsts or w in lasts]
    clear = [w for w in known if w not in AMBIGUOUS]
    if any(w in firsts for w in clear):
        return 2
    if any(w in lasts for w in clear) and any(w in firsts for w in words):
        return 2  # a clear surname beside a given name ("Ray Okafor"; not "Ray-Ban Meta")
    if clear and _INITIALS_SURNAME.match(span.strip()) and _words(span)[-1] in clear:
        return 2  # initials and a clear surname ("K. Venkataraman", "J.P. Dunleavy")
    return 1 if known else 0


def has_cue(text: str, start: int, end: int) -> bool:
    """A title, greeting, introduction, header or relation word before the span, or a
    sign-off, address or verb of speech after it."""
    before = text[max(0, start - 40) : start]
    if _CUE_BEFORE.search(before) or _CUE_AFTER.match(text[end : end + 40]):
        return True
    return bool(_DASH_BEFORE.search(before)) and _signs_off(text, start, end)


def _signs_off(text: str, start: int, end: int) -> bool:
    """The span ends the message and its line is not the last of a bulleted list."""
    if text[end:].strip():
        return False
    line_start = text.rfind("\n", 0, start) + 1
    previous = text.rfind("\n", 0, max(0, line_start - 1)) + 1
    return not _BULLET_LINE.fullmatch(text, previous, len(text.rstrip()))


def corroborated(text: str, start: int, end: int, *, model: bool = False) -> bool:
    """Whether a model or proper-noun name hit ``text[start:end]`` is kept (see module);
    ``model``: the NER model itself called it a person (a full-name shape then suffices)."""
    span = text[start:end]
    title = _TITLE_BEFORE.search(text, max(0, start - 6), start)
    if title and EPONYMS.match(title.group(0) + span.strip()):
        return False  # "the Dr. Martens boots": the model took the title off a brand
    if EPONYMS.match(span.strip()):
        # "Hi, this is Raymond James": a person introducing themselves by a brand's name
        return len(span.split()) >= 2 and bool(_SELF_INTRO.search(text, 0, start))
    if _not_a_name(text, start, end) or _a_place(text, start, end):
        return False
    if lexicon_support(span) == 2 or has_cue(text, start, end):
        return True
    # two or three capitalised words, none a stop word nor an ambiguous name word ("Zainab
    # Abubakar", "Sunita Reddy"; not "the Ray-Ban Meta", "Cancel my Netflix Premium"): the
    # shape of a full name the lexicon lacks or half knows; after "my" or "the" a thing's
    # ("my Oneplus Nord keeps rebooting")
    owned = _OWNED.search(text, max(0, start - 8), start)
    return model and _full_name_shape(span) and not owned


def _not_a_name(text: str, start: int, end: int) -> bool:
    """What the span's words, or the words after it, say is no one's name."""
    span, after = text[start:end], text[end : end + 30]
    return bool(
        # "Forza Horizon II, ... are on the bundle": titles, not people
        any(c.isdigit() or c in "_@/#" for c in span)
        or in_title_list(text, start, end)
        # "Hi Team,", "Dear Customer,": whom a letter greets when no one by name
        or span.strip().lower() in NOT_GREETED
        # "Jan–Mar", "May to June": months and days are no one's name
        or all(w in _CALENDAR for w in _words(span))
        # "the Ray-Ban Meta", "my Netflix Premium", "Rua Augusta", "Calle Ocho"
        or span.split()[0].lower() in _DETERMINERS
        or fold(span.split()[0]) in STREET_FIRST
        # "Pixel 7a", "Flight 1432", "Delta Air Lines", "Chase Bank"
        or re.match(r"[ \t]*[-#]?\d{1,4}[A-Za-z]{0,3}(?![\d./:-])", after)
        or (_ORG_AFTER.match(after) and not _owner(span))
    )


def _a_place(text: str, start: int, end: int) -> bool:
    """Whether the span is a street, a building or a place named after a person."""
    span, after = text[start:end], text[end : end + 30]
    words = span.split()
    last = words[-1]
    if len(words) > 1 and ORG_WORD.match(last):
        # the model took the street in ("on Nguyen Hue Street"; "Minji Park" stays, and so
        # does a person introducing themselves: "this is Grace Lane")
        if _PLACE_BEFORE.search(text, max(0, start - 8), start) or not (
            given_first(span, last) or _SELF_INTRO.search(text, max(0, start - 20), start)
        ):
            return True
        # "Queen Elizabeth Olympic Park", "Elizabeth Hospital"; a surname that is also a place
        # word stays ("Lois Lane", "Minji Park"), and so does a cued name
        half_known = len(words) > 2 and not known(words[-2]) or not known(last)
        if half_known and not _person_cue(text, start, end):
            return True
    # "Lenin Square is", "Reagan National flights", "Ruth's Chris Steak House"
    return _named_place(span, after) and not _person_cue(text, start, end)


def _owner(span: str) -> bool:
    """A full name in the possessive ("Declan Whitfield's account", "Tendai Moyo's card"): a
    person who owns the account or card after it, not a brand (brands named after people,
    :data:`EPONYMS`, are out before)."""
    owner = span[:-2]
    return span.endswith(("'s", "’s")) and (lexicon_support(span) == 2 or _full_name_shape(owner))


# a determiner or possessive before a thing's name ("my Oneplus Nord", "the Ray-Ban Meta")
_OWNED = re.compile(r"(?i)(?<![a-z])(?:" + alternatives("names_owned_determiners") + r")[ \t]+$")


# a building's or a place's word after a person's name ("Lenin Square", "Reagan National",
# "Prince Charles Cinema"); these are surnames too ("Shirley Temple"), so a cue or a surname
# the lexicon knows keeps a person
PLACE_WORD = re.compile(r"(?i)^(?:" + alternatives("names_place_words") + ")$")


_SPEECH_AFTER = re.compile(r"(?i)\s+(?:" + alternatives("names_speech_verbs") + r")\b")


def _person_cue(text: str, start: int, end: int) -> bool:
    """A title, greeting or role before the span, or a verb of speech after it ("is the"
    after it is no cue here: "Lenin Square is the meeting point")."""
    before = text[max(0, start - 40) : start]
    return bool(_CUE_BEFORE.search(before) or _SPEECH_AFTER.match(text, end))


def _named_place(span: str, after: str) -> bool:
    """Whether the span ends in a place word it is not a surname in, or one follows it."""
    words = span.split()
    following = re.match(r"[ \t]+([\p{L}]+)", after)
    if following and PLACE_WORD.match(following.group(1)):
        return True
    return len(words) > 1 and bool(PLACE_WORD.match(words[-1])) and not known(words[-1])


_TITLE_BEFORE = re.compile(r"\b\p{Lu}\p{Ll}{0,3}\.?[ \t]+$")


def known(word: str) -> bool:
    """Whether the lexicon holds the word as a given name or a surname."""
    folded = _words(word)
    firsts, lasts = lexicon()
    return bool(folded) and (folded[0] in firsts or folded[0] in lasts)


# a preposition or article before a place ("on Nguyen Hue Street")
_PLACE_BEFORE = re.compile(
    r"(?i)(?<![a-z])(?:" + alternatives("names_place_prepositions") + r")\s+$"
)


def given_first(span: str, last: str) -> bool:
    """Whether the span opens with a clear given name ("Lois Lane") or ends with a Korean
    surname ("Minji Park")."""
    first = _words(span)[:1]
    return fold(last) in KOREAN_SURNAMES or (first[0] in lexicon()[0] and first[0] not in AMBIGUOUS)


_TIME_ENTS = frozenset({"DATE", "TIME"})


def product_modifier(doc: Any, start: int, end: int) -> bool:
    """Whether the name-like span ``start:end`` of spaCy's ``doc`` modifies a common noun
    after it - a brand before what it sells ("the Paul Mitchell shampoo", "my Kenneth Cole
    watch", "Bajaj Pulsar spare parts are ...") - rather than naming a person. It does when
    a determiner or possessive comes before it, or it opens its sentence and the noun phrase
    it opens is the subject of a verb; "Ngozi today said" is no noun phrase (a date)."""
    span = doc.char_span(start, end, alignment_mode="expand") if doc is not None else None
    if span is None or span.end >= len(doc):
        return False
    k = span.end
    possessive = doc[k].tag_ == "POS"  # "my Levi's jeans", "a McDonald's burger"
    k += possessive
    determined = span.start > 0 and doc[span.start - 1].tag_ in ("DT", "PRP$")
    line = k
    while determined and k < len(doc) and k - line < 2 and doc[k].tag_ in ("NNP", "CD"):
        k += 1  # a product line between them: "the Marc Jacobs Daisy perfume"
    while k < len(doc) and doc[k].tag_ == "JJ" and doc[k].is_lower:
        k += 1
    if not (k < len(doc) and _common_noun(doc[k])):
        return False
    before = doc[span.start - 1] if span.start > 0 else None
    if before is not None and before.tag_ in ("DT", "PRP$"):
        return True
    # a measure of it: "a case of Sam Adams lager", "two bottles of Jack Daniel's whiskey"
    if before is not None and before.lower_ == "of" and span.start > 1:
        return bool(doc[span.start - 2].tag_ in ("NN", "NNS") and doc[span.start - 2].is_lower)
    if possessive or (
        before is not None and not (before.is_space or before.text in (".", "!", "?", ":"))
    ):
        return False
    while k < len(doc) and _common_noun(doc[k]):
        k += 1
    return k < len(doc) and doc[k].tag_.startswith(("VB", "MD"))


def _common_noun(tok: Any) -> bool:
    return bool(tok.tag_ in ("NN", "NNS") and tok.is_lower and tok.ent_type_ not in _TIME_ENTS)


def _full_name_shape(span: str) -> bool:
    from tasks.pii.lexicon import STOP_WORDS

    words = span.split()
    return (
        2 <= len(words) <= 3
        and all(w[:1].isupper() and w.lower() not in STOP_WORDS for w in words)
        and not any(w.lower() in AMBIGUOUS for w in words)
    )
