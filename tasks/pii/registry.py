"""The one list of the anonymiser's recognisers and the languages each serves.

:data:`REGISTRY` holds, in the order the analyzer gets them, ``(languages, name, build)``:
``languages`` is :data:`EVERY` (all configured languages), :data:`LATIN` (every language but
Korean: English and the other Latin-script languages) or :data:`KOREAN`; ``build(language)``
returns one Presidio recogniser. The recognisers themselves live by family: ``generic/``
(identifiers, contacts, secrets, addresses, tool-result structure), ``names/`` (English and
romanised names by the words around them), ``ner/`` (the spaCy model's names, corroborated),
``korean/`` (Korean text). :data:`LEARNED_EN` marks the learned English name layer
(``ner/learned_names.py``) and :data:`LEARNED_KO` the learned Korean one
(``ner/learned_names_ko.py``), built only when ``FLYWHEEL_CURATE__LEARNED_NAMES`` is on;
:data:`ENGLISH` marks what serves English alone whatever the setting (the learned layer read
on text typed without capitals, where the rules find few names). A new
recogniser is one line here plus its module in its family
(``docs/contributing.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tasks.pii.generic import contact
from tasks.pii.generic.addresses import street_address_spans
from tasks.pii.generic.identifiers import RULES, context_spans
from tasks.pii.generic.shapes import SHAPES, SPAN_RECOGNIZERS
from tasks.pii.names.cues import cued_name_spans
from tasks.pii.names.greetings import lower_name_recognizer
from tasks.pii.names.objects import object_name_spans
from tasks.pii.names.spans import structured_name_spans
from tasks.pii.names.subjects import subject_name_spans
from tasks.pii.ner import learned_names, learned_names_ko, spacy_names
from tasks.pii.span_recognizer import pattern_recognizer, person_recognizer, span_recognizer

EVERY, LATIN, KOREAN = "every", "latin", "ko"
LEARNED_EN = "learned-en"  # English only, and only with the learned_names setting on
LEARNED_KO = "learned-ko"  # Korean only, and only with the learned_names setting on
ENGLISH = "en"  # English only, whatever the setting
Build = Callable[[str], Any]


def _presidio(cls_name: str) -> Build:
    def build(language: str) -> Any:
        from presidio_analyzer import predefined_recognizers

        return getattr(predefined_recognizers, cls_name)(supported_language=language)

    return build


def _pattern(shape: tuple[str, str, float, str]) -> Build:
    return lambda language: pattern_recognizer(*shape, language=language)


def _spans(entity: str, name: str, score: float, spans: Any, doc: str) -> Build:
    return lambda language: span_recognizer(
        entity=entity, name=name, score=score, spans=spans, doc=doc
    )(supported_language=language)


def _person(name: str, score: float, spans: Any, doc: str) -> Build:
    return lambda language: person_recognizer(name=name, score=score, spans=spans, doc=doc)(
        supported_language=language
    )


def _korean(name: str) -> Build:
    def build(language: str) -> Any:
        from tasks.pii import korean

        return korean.RECOGNIZERS[name](language)

    return build


REGISTRY: tuple[tuple[str, str, Build], ...] = (
    # generic: every language
    (
        EVERY,
        "OfflineEmailRecognizer",
        lambda lang: contact.offline_email_recognizer()(supported_language=lang),
    ),
    (EVERY, "CreditCardRecognizer", _presidio("CreditCardRecognizer")),
    (EVERY, "LuhnCardRecognizer", contact.luhn_card_recognizer),
    (EVERY, "IbanRecognizer", _presidio("IbanRecognizer")),
    (LATIN, "IpRecognizer", _presidio("IpRecognizer")),  # Korean: korean.ids' IPv4
    (EVERY, "UrlRecognizer", _presidio("UrlRecognizer")),
    *(
        (
            EVERY,
            f"Context{rule.entity.title().replace('_', '')}Recognizer",
            _spans(
                rule.entity,
                f"Context{rule.entity.title().replace('_', '')}Recognizer",
                0.6,
                context_spans(rule),
                f"{rule.entity} after its cue words (see tasks.pii.generic.identifiers).",
            ),
        )
        for rule in RULES
    ),
    *((EVERY, spec[1], _spans(*spec)) for spec in SPAN_RECOGNIZERS),
    *(
        (LATIN if shape[3] == "Ipv4Recognizer" else EVERY, shape[3], _pattern(shape))
        for shape in SHAPES
    ),
    ("custom", "Custom<Entity>Recognizer", lambda _lang: None),  # FLYWHEEL_CURATE__CUSTOM_PATTERNS
    # names, phones and addresses of Latin-script text
    (LATIN, "CandidatePhoneRecognizer", contact.candidate_phone_recognizer),
    (LATIN, "NameFallbackRecognizer", spacy_names.name_fallback),
    (LATIN, "UsSsnRecognizer", _presidio("UsSsnRecognizer")),
    (LATIN, "SpacyRecognizer", spacy_names.corroborated_ner),
    (
        LATIN,
        "StructuredNameRecognizer",
        _spans(
            "PERSON",
            "StructuredNameRecognizer",
            0.6,
            structured_name_spans,
            "Names in mail headers, JSON/form fields, airline style, romanised Korean.",
        ),
    ),
    (
        LATIN,
        "CuedNameRecognizer",
        _person(
            "CuedNameRecognizer",
            0.55,
            cued_name_spans,
            "Names after role words and vocatives, in capitals (see tasks.pii.names.cues).",
        ),
    ),
    (
        LATIN,
        "SubjectNameRecognizer",
        _person(
            "SubjectNameRecognizer",
            0.5,
            subject_name_spans,
            "Names as a clause's subject, lower-case names (see tasks.pii.names.subjects).",
        ),
    ),
    (
        LATIN,
        "ObjectNameRecognizer",
        _person(
            "ObjectNameRecognizer",
            0.5,
            object_name_spans,
            "Names beside a name or in a person's slot (see tasks.pii.names.objects).",
        ),
    ),
    (LEARNED_EN, "LearnedNameRecognizer", learned_names.learned_names),
    (ENGLISH, "LowerCaseLearnedNameRecognizer", learned_names.lower_case_names),
    (LATIN, "AnyAreaPhoneRecognizer", _pattern(contact.NANP_ANY)),
    (LATIN, "UkNinoRecognizer", _pattern(contact.NINO)),
    (
        LATIN,
        "LowerNameRecognizer",
        lambda lang: lower_name_recognizer(keep=spacy_names.lower_or_known)(
            supported_language=lang
        ),
    ),
    *((LATIN, shape[3], _pattern(shape)) for shape in contact.PHONES),
    (LATIN, "DigitRunRecognizer", contact.digit_run_phone_recognizer),
    (
        LATIN,
        "StreetAddressRecognizer",
        _spans(
            "LOCATION",
            "StreetAddressRecognizer",
            0.5,
            street_address_spans,
            "Street addresses and PO boxes (see tasks.pii.generic.addresses).",
        ),
    ),
    # Korean text
    (KOREAN, "KrBrnRecognizer", _presidio("KrBrnRecognizer")),
    (KOREAN, "KrBrnShapeRecognizer", _korean("KrBrnShapeRecognizer")),
    (KOREAN, "KoreanIdRecognizer", _korean("KoreanIdRecognizer")),
    (KOREAN, "KoreanAddressRecognizer", _korean("KoreanAddressRecognizer")),
    (KOREAN, "KoreanNameRecognizer", _korean("KoreanNameRecognizer")),
    (LEARNED_KO, "LearnedKoreanNameRecognizer", learned_names_ko.learned_names_ko),
)


def serves(languages: str, language: str) -> bool:
    """Whether a registry entry's ``languages`` include ``language``."""
    if languages == EVERY:
        return True
    if languages in (LEARNED_EN, ENGLISH):
        return language == "en"
    if languages == LEARNED_KO:
        return language == "ko"
    return language == "ko" if languages == KOREAN else language != "ko"


def build_recognizers(
    language: str, custom_patterns: dict[str, str], *, learned_names: bool = False
) -> list[Any]:
    """The recognisers of :data:`REGISTRY` that serve ``language``, in order, with the custom
    patterns from settings where the registry places them (and the learned English name
    and Korean name layers where ``learned_names`` asks for them)."""
    out = []
    for languages, _name, build in REGISTRY:
        if languages in (LEARNED_EN, LEARNED_KO) and not learned_names:
            continue  # the learned layers only where the setting asks for it
        if languages == "custom":
            out += [
                pattern_recognizer(
                    entity, regex, 0.9, f"Custom{entity.title()}Recognizer", language=language
                )
                for entity, regex in custom_patterns.items()
            ]
        elif serves(languages, language):
            out.append(build(language))
    return out
