"""Names from the spaCy model: its PERSON hits that something corroborates (brands and products
are not people), and a fallback for the names the small model misses (PERSON spans grown over
titles, particles and proper nouns, runs of proper nouns, ORG spans the lexicon knows as names,
a capitalised word after a self-introduction, names typed in lower case or known to the
lexicon after a greeting)."""

from __future__ import annotations

from typing import Any

import regex as re

from tasks.pii.names import (
    NAME_PARTICLES,
    ORG_WORD,
    SELF_INTRODUCTION,
    corroborated,
    fold,
    has_cue,
    lexicon_support,
    product_modifier,
)
from tasks.pii.names.cues import particles_end
from tasks.pii.span_recognizer import person_recognizer

# honorifics ("Mr.", "Sig.ra", "Dipl.-Ing.", "Frau") and name particles ("van der", "de la")
_TITLE = re.compile(r"^(?:\p{Lu}\p{Ll}{0,4}\.(?:-?\p{L}{1,4}\.?)?|Frau|Herr|Mme|Mlle|Miss)$")
# a sign-off signs on its line or the next; a greeting or an introduction names on its own
# line ("Hello,\n\nBelow are the details": a paragraph's first word)
_NAME_CUE = re.compile(
    rf"(?i:\b(?:(?:regards,|thanks,|cheers,|sincerely,"
    r"|yours(?: truly| sincerely| faithfully)?,|best(?: wishes)?,|warmly,)\s+"
    rf"|(?:{SELF_INTRODUCTION}|it's|hello,|hi,?|ask|colleague)[ \t]+))"
    r"((?:\p{Lu}[\p{L}'’]+[ -]?){1,3})(?<! )"
)


def corroborated_ner(language: str) -> Any:
    """spaCy's PERSON findings, corroborated (the model's places are never anonymised: a city
    or an airport is not personal data; street addresses come from patterns)."""
    from presidio_analyzer.predefined_recognizers import SpacyRecognizer

    cls = _corroborated_ner(SpacyRecognizer)
    return cls(supported_entities=["PERSON"], supported_language=language)


def name_fallback(language: str) -> Any:
    """The fallback for names the small model misses."""
    return _name_fallback_recognizer()(supported_language=language)


def lower_or_known(text: str, start: int, end: int) -> bool:
    """A greeted name the lower-case recogniser may keep: lower case or known to the lexicon
    (a capitalised word there is the model's and the cue rules' to judge: "thanks Amazon")."""
    return _lower_or_known(text, start, end)


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
