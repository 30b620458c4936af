"""Presidio recognisers flywheel adds to the predefined ones: an offline e-mail validator
(tldextract on its bundled suffix list), a Luhn-checked card pattern for any issuer, phone
numbers as people write them (NANP, international, national trunk-0, bare digit runs, and
Presidio's phonenumbers matcher run only on phone-like stretches), street addresses, a name
fallback for the names the small spaCy model misses, and the custom patterns from settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

import regex as re  # Presidio's dependency; \p{Lu} for names in any Latin script

from tasks.pii.addresses import street_address_spans
from tasks.pii.greetings import lower_name_recognizer
from tasks.pii.name_cues import cued_name_spans, fold, particles_end
from tasks.pii.name_objects import object_name_spans
from tasks.pii.name_spans import structured_name_spans
from tasks.pii.names import (
    NAME_PARTICLES,
    ORG_WORD,
    SELF_INTRODUCTION,
    corroborated,
    has_cue,
    lexicon_support,
    product_modifier,
)
from tasks.pii.shapes import identifier_recognizers
from tasks.pii.span_recognizer import pattern_recognizer, person_recognizer, span_recognizer
from tasks.pii.subjects import subject_name_spans

_CARD = r"(?<![\d-])\d(?:[ .-]?\d){11,18}(?![\d-])"
# North-American numbers as written by people and CRMs: 001-/+1 prefixes, dots, extensions
_NANP = (
    r"(?<![\w+])(?:(?:\+|00)?1[ .-]?)?\(?[2-9]\d{2}\)?[ .-]?\d{3}[ .-]\d{4}"
    r"(?:\s?(?:x|ext\.?)\s?\d{1,5})?(?!\d)"
)
# any three-digit area code, as people write it, even one the NANP validator rejects
_NANP_ANY = r"(?<![\w+])(?:\(\d{3}\)\s?|\d{3}[.-])\d{3}[ .-]\d{4}(?![\d-])"
# UK National Insurance numbers, reserved prefixes (ZZ, the test prefix) and any suffix too
_NINO = r"(?<![\w-])[A-Z]{2} ?\d{2} ?\d{2} ?\d{2} ?[A-Z](?![\w-])"
# after "00" at least eight more digits: "case 00418227" is a zero-padded reference
_INTL = r"(?<![\w+])(?:\+|00(?=(?:[ .()-]?\d){8}))[1-9]\d{0,2}(?:[ .-]?\(?\d{1,4}\)?){2,5}(?!\d)"
_PHONEISH = re.compile(r"(?<![\w+])[+(]?\d[\d ().\-/]{5,}\d(?:\s?(?:x|ext\.?)\s?\d{1,5})?")
_NOT_PHONE = re.compile(r"^\d{3}-\d{2}-\d{4,6}$")  # SSN and account-number shapes
PHONE_REGIONS = ("US", "GB", "DE", "FR", "ES", "IT", "NL", "IE", "CA", "AU", "IN", "BR", "IL", "KR")
# honorifics ("Mr.", "Sig.ra", "Dipl.-Ing.", "Frau") and name particles ("van der", "de la")
_TITLE = re.compile(r"^(?:\p{Lu}\p{Ll}{0,4}\.(?:-?\p{L}{1,4}\.?)?|Frau|Herr|Mme|Mlle|Miss)$")
_NAME_CUE = re.compile(
    rf"(?i:\b(?:{SELF_INTRODUCTION}|it's|regards,|thanks,|cheers,|sincerely,"
    r"|yours(?: truly| sincerely| faithfully)?,|best(?: wishes)?,|warmly,|hello,|hi,?|ask"
    r"|colleague))\s+"
    r"((?:\p{Lu}[\p{L}'’]+[ -]?){1,3})(?<! )"
)
# national numbers with a trunk 0 ("(0141) 496 0621") and bare 10-15 digit runs
_NATIONAL = r"(?<![\w+])\(?0\d{2,4}\)?[ -]?\d{3,4}[ -]?\d{3,4}(?!\d)"
_BARE_DIGITS = r"(?<![\w+.-])\d{10,15}(?![\w.-])"


def luhn_ok(digits: str) -> bool:
    """The Luhn checksum of a card number (separators ignored)."""
    nums = [int(c) for c in digits if c.isdigit()]
    total = 0
    for i, d in enumerate(reversed(nums)):
        total += (d * 2 - 9 if d * 2 > 9 else d * 2) if i % 2 else d
    return len(nums) >= 12 and total % 10 == 0


def build_recognizers(language: str, custom_patterns: dict[str, str]) -> list[Any]:
    """Presidio recognisers for one language: the predefined ones flywheel relies on (with an
    offline e-mail validator), extra patterns for formats the defaults miss, and the custom
    patterns from settings. Korean (``ko``) gets the language-neutral ones plus those of
    :mod:`tasks.pii.korean`."""
    from presidio_analyzer import Pattern, PatternRecognizer
    from presidio_analyzer.predefined_recognizers import (
        CreditCardRecognizer,
        EmailRecognizer,
        IbanRecognizer,
        IpRecognizer,
        PhoneRecognizer,
        SpacyRecognizer,
        UrlRecognizer,
        UsSsnRecognizer,
    )

    extractor = _offline_tldextract()

    class OfflineEmailRecognizer(EmailRecognizer):
        def validate_result(self, pattern_text: str) -> bool:
            return bool(extractor(pattern_text.rsplit("@", 1)[-1]).fqdn)

    class LuhnCardRecognizer(PatternRecognizer):
        def validate_result(self, pattern_text: str) -> bool:
            return luhn_ok(pattern_text)

    pattern = partial(pattern_recognizer, language=language)

    lang: dict[str, Any] = {"supported_language": language}
    common = [
        OfflineEmailRecognizer(**lang),
        CreditCardRecognizer(**lang),
        LuhnCardRecognizer(
            supported_entity="CREDIT_CARD",
            name="LuhnCardRecognizer",
            patterns=[Pattern("any issuer, Luhn-valid", _CARD, 0.6)],
            **lang,
        ),
        IbanRecognizer(**lang),
        IpRecognizer(**lang),
        UrlRecognizer(**lang),
    ]
    common += identifier_recognizers(language)
    common += [
        pattern(entity, regex, 0.9, f"Custom{entity.title()}Recognizer")
        for entity, regex in custom_patterns.items()
    ]
    if language == "ko":
        from tasks.pii.korean import build_korean_recognizers

        return build_korean_recognizers(language, common)
    recognizers = [
        *common,
        _candidate_phone_recognizer(PhoneRecognizer)(supported_regions=PHONE_REGIONS, **lang),
        _name_fallback_recognizer()(**lang),
        UsSsnRecognizer(**lang),
        # the model's places (cities, countries, airports) are not personal data; street
        # addresses come from the patterns below. Its PERSON hits are filtered in engine._keep
        _corroborated_ner(SpacyRecognizer)(supported_entities=["PERSON"], **lang),
        span_recognizer(
            entity="PERSON",
            name="StructuredNameRecognizer",
            score=0.6,
            spans=structured_name_spans,
            doc="Names in mail headers, JSON/form fields, airline style, romanised Korean.",
        )(**lang),
        person_recognizer(
            name="CuedNameRecognizer",
            score=0.55,
            spans=cued_name_spans,
            doc="Names after role words and vocatives, in capitals (see tasks.pii.name_cues).",
        )(**lang),
        person_recognizer(
            name="SubjectNameRecognizer",
            score=0.5,
            spans=subject_name_spans,
            doc="Names as a clause's subject, lower-case names (see tasks.pii.subjects).",
        )(**lang),
        person_recognizer(
            name="ObjectNameRecognizer",
            score=0.5,
            spans=object_name_spans,
            doc="Names beside a name or in a person's slot (see tasks.pii.name_objects).",
        )(**lang),
        pattern("PHONE_NUMBER", _NANP_ANY, 0.45, "AnyAreaPhoneRecognizer"),
        pattern("UK_NINO", _NINO, 0.5, "UkNinoRecognizer"),
        # a capitalised word there is the model's and the cue rules' to judge ("thanks Amazon")
        lower_name_recognizer(keep=_lower_or_known)(**lang),
        pattern("PHONE_NUMBER", _NANP, 0.5, "NanpPhoneRecognizer"),
        pattern("PHONE_NUMBER", _INTL, 0.5, "IntlPhoneRecognizer"),
        pattern("PHONE_NUMBER", _NATIONAL, 0.4, "NationalPhoneRecognizer"),
        pattern("PHONE_NUMBER", _BARE_DIGITS, 0.4, "DigitRunRecognizer"),
        span_recognizer(
            entity="LOCATION",
            name="StreetAddressRecognizer",
            score=0.5,
            spans=street_address_spans,
            doc="Street addresses and PO boxes (see tasks.pii.addresses).",
        )(**lang),
    ]
    return recognizers


# "its" without its apostrophe is also the possessive: "Santiago and its suburbs"
_ITS = re.compile(r"(?i)(?<![\w'’])its\s+$")


def _lower_or_known(text: str, start: int, end: int) -> bool:
    if _ITS.search(text, max(0, start - 8), start) and not lexicon_support(text[start:end]):
        return False
    return corroborated(text, start, end) and (
        text[start].islower() or lexicon_support(text[start:end]) > 0
    )


def _corroborated_ner(base: type) -> type:
    class CorroboratedSpacyRecognizer(base):  # type: ignore[misc,valid-type]
        """spaCy's PERSON hits that something corroborates (brands and products are not
        people; see :func:`tasks.pii.names.corroborated`), checked before the analyzer
        drops other recognisers' findings of the same span as duplicates."""

        def analyze(self, text: str, entities: list[str], nlp_artifacts: Any = None) -> list:
            found = super().analyze(text, entities, nlp_artifacts)
            for r in found:  # "Mary Kay foundation": the model ran on into a common noun
                r.end = _without_lower_tail(text, r.start, r.end)
            doc = getattr(nlp_artifacts, "tokens", None)
            return [
                r
                for r in found
                if r.entity_type == "PERSON"
                and corroborated(text, r.start, r.end, model=True)
                and not product_modifier(doc, r.start, r.end)
            ]

    CorroboratedSpacyRecognizer.__name__ = "SpacyRecognizer"
    return CorroboratedSpacyRecognizer


def _without_lower_tail(text: str, start: int, end: int) -> int:
    """The end of a capitalised name span without the lower-case words the model ran on
    into ("Mary Kay foundation"); a name typed all in lower case keeps its words."""
    words = list(re.finditer(r"\S+", text[start:end]))
    if not words or not words[0].group(0)[:1].isupper():
        return end
    while len(words) > 1 and words[-1].group(0).isalpha() and words[-1].group(0).islower():
        if words[-1].group(0) in NAME_PARTICLES:
            break
        words.pop()
    return start + words[-1].end()


def _candidate_phone_recognizer(base: type) -> type:
    import phonenumbers
    from presidio_analyzer import EntityRecognizer

    class CandidatePhoneRecognizer(base):  # type: ignore[misc,valid-type]
        """Presidio's phonenumbers matcher, run only on phone-like stretches of the text
        (scanning whole texts once per region is the analyzer's costliest step)."""

        def analyze(self, text: str, entities: list[str], nlp_artifacts: Any = None) -> list:
            results = []
            for cand in _PHONEISH.finditer(text):
                digits = sum(c.isdigit() for c in cand.group(0))
                if not 7 <= digits <= 15 or _NOT_PHONE.match(cand.group(0)):
                    continue
                for region in self.supported_regions:  # first region that parses it wins
                    found = [
                        _Span(cand.start() + m.start, cand.start() + m.end)
                        for m in phonenumbers.PhoneNumberMatcher(
                            cand.group(0), region, self.leniency
                        )
                    ]
                    results += [self._get_recognizer_result(s, text, region, None) for s in found]
                    if found:
                        break
            return list(EntityRecognizer.remove_duplicates(results))

    return CandidatePhoneRecognizer


@dataclass(frozen=True)
class _Span:
    start: int
    end: int


def _name_fallback_recognizer() -> type:
    return person_recognizer(
        name="NameFallbackRecognizer",
        score=0.5,
        spans=lambda text, nlp: [
            (s, e) for s, e in _fallback_name_spans(text, nlp) if corroborated(text, s, e)
        ],
        doc="""Names the small spaCy model misses: a PERSON span grown over adjacent proper
        nouns ("Sig. <Gianfranco Pezzali>"), runs of two or more capitalised proper nouns,
        and a capitalised word after a self-introduction cue ("I'm", "regards,").""",
    )


def _fallback_name_spans(text: str, nlp_artifacts: Any) -> list[tuple[int, int]]:
    spans = [(m.start(1), m.end(1)) for m in _NAME_CUE.finditer(text)]
    doc = getattr(nlp_artifacts, "tokens", None)
    if doc is not None and len(doc) and hasattr(doc, "ents"):
        spans = [_grow_chars(doc, start, end) for start, end in spans]
        spans += _propn_spans(doc, nlp_artifacts.entities)
        spans += _org_names(text, nlp_artifacts.entities)
    return spans


def _org_names(text: str, entities: list[Any]) -> list[tuple[int, int]]:
    """The small model calls many full names ORG ("Amelia Hart", "Ananya Iyer"): an ORG span
    the lexicon knows as a name (a clear given name, or a name with a cue beside it)."""
    spans = []
    for ent in entities:
        # Presidio's artefacts carry the mapped label (ORGANIZATION), a bare Doc spaCy's
        words = ent.text.replace("-", " ").split()  # "Jean-Baptiste N'Diaye": three
        if ent.label_ not in ("ORG", "ORGANIZATION") or not 1 <= len(words) <= 3:
            continue
        start, end = ent.start_char, ent.end_char
        if not _name_words_only(ent.text):
            continue  # "Bank of America", "Delta Air Lines"
        support = lexicon_support(ent.text)
        if (support == 2 and len(words) > 1) or (support and has_cue(text, start, end)):
            spans.append((start, end))
    return spans


def _name_words_only(span: str) -> bool:
    """Capitalised words (lower-case only as a name particle), none naming an organisation
    or what it sells ("Bank", "Airlines", "Store")."""
    words = span.replace("-", " ").split()
    return all(
        (w[:1].isupper() or w.lower() in NAME_PARTICLES) and not ORG_WORD.match(w) for w in words
    )


def _coordinated(doc: Any, entities: list[Any]) -> list[tuple[int, int]]:
    """A proper noun joined to a person by "and", "or" or "&" ("ask Siddharth or Ananya"),
    when no other entity claims it (the fallback still wants it corroborated)."""
    claimed = {i for ent in entities if ent.label_ != "PERSON" for i in range(ent.start, ent.end)}
    spans = []
    for ent in entities:
        k = ent.end
        if ent.label_ != "PERSON" or k + 1 >= len(doc) or doc[k].lower_ not in ("and", "or", "&"):
            continue
        if _is_name_token(doc[k + 1]) and k + 1 not in claimed:
            start, end = _grow(doc, k + 1, k + 2)
            spans.append((doc[start].idx, doc[end - 1].idx + len(doc[end - 1])))
    return spans


def _is_name_token(token: Any) -> bool:
    return bool(token.tag_ in ("NNP", "NNPS") and token.text[:1].isupper() and token.is_alpha)


def _known_word(token: Any) -> bool:
    """A capitalised word the lexicon clearly knows as a name, whatever its tag (the tagger
    reads "Nguyễn" before "Thị Lan" as an adverb)."""
    return bool(
        token.text[:1].isupper() and token.is_alpha and lexicon_support(token.text) == 2
    ) or bool(token.text[:1].isupper() and token.is_alpha and _clear_surname(token.text))


def _clear_surname(word: str) -> bool:
    from tasks.pii.names import AMBIGUOUS, lexicon

    w = fold(word)
    return w in lexicon()[1] and w not in AMBIGUOUS


def _grow(doc: Any, start: int, end: int) -> tuple[int, int]:
    """Extend a name over titles before it and over particles ("van der", "de la"),
    hyphens and proper nouns after it."""
    while start > 0:
        before = doc[start - 1].text
        if _is_name_token(doc[start - 1]) or _TITLE.match(before) or _known_word(doc[start - 1]):
            start -= 1
        elif before == "." and start > 1 and _TITLE.match(doc[start - 2].text + "."):
            start -= 2  # "Ing" "." tokenised apart
        else:
            break
    while end < len(doc):
        if _is_name_token(doc[end]):
            end += 1
            continue
        k = particles_end(doc, end, limit=None, joiners=True)
        if end < k < len(doc) and doc[k].is_alpha and doc[k].text[:1].isupper():
            end = k + 1
            continue
        break
    return start, end


def _grow_chars(doc: Any, start: int, end: int) -> tuple[int, int]:
    span = doc.char_span(start, end, alignment_mode="expand")
    if span is None:
        return start, end
    first, last = _grow(doc, span.start, span.end)
    return min(start, doc[first].idx), max(end, doc[last - 1].idx + len(doc[last - 1]))


def _propn_spans(doc: Any, entities: list[Any]) -> list[tuple[int, int]]:
    spans = []
    for ent in entities:  # grow PERSON findings over adjacent titles, particles, proper nouns
        if ent.label_ == "PERSON":
            start, end = _grow(doc, ent.start, ent.end)
            if (start, end) != (ent.start, ent.end):
                spans.append((doc[start].idx, doc[end - 1].idx + len(doc[end - 1])))
    spans += _coordinated(doc, entities)
    covered = {i for ent in entities for i in range(ent.start, ent.end)}
    i = 0
    while i < len(doc):  # runs of >= 2 capitalised proper nouns nobody else claimed
        j = i
        while j < len(doc) and _is_name_token(doc[j]) and j not in covered:
            j += 1
        if j - i >= 2:
            start, end = _grow(doc, i, j)
            spans.append((doc[start].idx, doc[end - 1].idx + len(doc[end - 1])))
        i = max(j, i + 1)
    return spans


@lru_cache(maxsize=1)
def _offline_tldextract() -> Any:
    """tldextract on its bundled public-suffix snapshot: no fetch, no cache directory."""
    import tldextract

    return tldextract.TLDExtract(cache_dir=None, suffix_list_urls=(), fallback_to_snapshot=True)
