"""Structure-aware detection: tool results and structured text read as what they are.

:func:`scan` finds JSON (anywhere in a text, nested, or encoded again inside a JSON string),
tables (CSV under a header, pipe tables) and key/value records. :func:`apply_structure` then
adjusts the recognisers' findings on a text:

- a value under a personal field (``fullName``, ``ship_to.name``, ``passenger``, ``dob``,
  ``passport.number``, ``emergency_contact``...; see :mod:`tasks.pii.generic.fields`) is replaced
  whatever the NER says;
- every finding inside a structure is cut to the cells it covers (a JSON string's content, a
  table cell), so the replacement keeps the structure valid: JSON stays parseable with the
  same keys, a CSV row keeps its columns; a bare JSON number is replaced whole and quoted;
- a name found once is replaced everywhere in the text, a surname or given name alone too
  (:func:`propagated_names`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING

import regex as re

from tasks.pii.generic.contact import EMAIL_RE
from tasks.pii.generic.fields import (
    ROLES,
    WEAK_ROLES,
    Field,
    field_type,
    name_part,
    norm_key,
    thing_name,
    valid_value,
    weak_key,
)
from tasks.pii.generic.identifiers import DATE_RE, ID_RE
from tasks.pii.generic.json_scan import JsonDoc, JsonString, encoded_docs, json_docs
from tasks.pii.generic.markup import markup
from tasks.pii.generic.references import drop_references, reference_key
from tasks.pii.generic.sql import sql
from tasks.pii.generic.tables import Region, pairs, tables
from tasks.pii.lexicon import STOP_WORDS, word_list
from tasks.pii.names import AMBIGUOUS

if TYPE_CHECKING:
    from presidio_analyzer import RecognizerResult

QUOTED = "quoted"  # recognition_metadata flag: a bare JSON token, replaced with a JSON string
_MAX_NESTING = 3
_NAME_WORD = re.compile(r"\p{L}[\p{L}'’-]*")
_NOT_PROPAGATED = frozenset(word_list("structured_not_propagated")) | ROLES
_WORDS_AFTER = re.compile(r"\p{L}{2,}")


@dataclass(frozen=True)
class Structure:
    """What :func:`scan` found in one text."""

    regions: tuple[Region, ...] = ()
    fields: tuple[Field, ...] = ()


def _may_nest(value: str) -> bool:
    return any(c in value for c in "{[\n=|")


def _json_structure(doc: JsonDoc, depth: int) -> Structure:
    escapes = tuple(
        (s.raw_starts[k], s.raw_ends[k])
        for s in doc.strings
        for k in range(len(s.value))
        if s.raw_ends[k] - s.raw_starts[k] > 1
    )
    regions = [
        Region(
            doc.start,
            doc.end,
            tuple((s.start, s.end) for s in doc.strings),
            tuple(doc.bare),
            escapes,
            tuple(doc.keys),
        )
    ]
    fields = []
    for v in doc.values:
        fields.append(
            Field(v.path, v.siblings, v.start, v.end, v.text, bare=v.string is None, kind=v.kind)
        )
        if v.string is not None and depth < _MAX_NESTING and _may_nest(v.text):
            inner = _mapped(scan(v.text, depth + 1), v.string, v.path)
            regions += inner.regions
            fields += inner.fields
    return Structure(tuple(regions), tuple(fields))


def _mapped(inner: Structure, string: JsonString, path: tuple[str, ...]) -> Structure:
    """A structure found in a decoded JSON string, on the raw text's offsets."""

    def span(s: int, e: int) -> tuple[int, int] | None:
        return string.raw_span(s, e) if e > s else None

    def spans(items: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
        return tuple(m for m in (span(s, e) for s, e in items) if m)

    regions = []
    for r in inner.regions:
        outer = span(r.start, r.end)
        if outer:
            regions.append(
                Region(*outer, spans(r.cells), spans(r.bare), spans(r.escapes), spans(r.keys))
            )
    fields = []
    for f in inner.fields:
        mapped = span(f.start, f.end)
        if mapped:
            fields.append(replace(f, path=path + f.path, start=mapped[0], end=mapped[1]))
    return Structure(tuple(regions), tuple(fields))


@lru_cache(maxsize=256)
def scan(text: str, depth: int = 0) -> Structure:
    """The JSON documents, tables, XML or HTML markup, SQL statements and key/value records of
    ``text``."""
    regions: list[Region] = []
    fields: list[Field] = []
    for doc in json_docs(text):
        found = _json_structure(doc, depth)
        regions += found.regions
        fields += found.fields
    taken = [(r.start, r.end) for r in regions]

    def free(start: int, end: int) -> bool:
        return not any(s < end and start < e for s, e in taken)

    for string in encoded_docs(text) if depth < _MAX_NESTING else ():
        if free(string.start, string.end):
            inner = _mapped(scan(string.value, depth + 1), string, ())
            regions += [
                Region(string.start, string.end, ((string.start, string.end),)),
                *inner.regions,
            ]
            fields += inner.fields
            taken.append((string.start, string.end))

    for region, cells in tables(text):
        if free(region.start, region.end):
            regions.append(region)
            fields += cells
    for found_regions, found_fields in (markup(text), sql(text)):
        for region in found_regions:
            if free(region.start, region.end):
                regions.append(region)
                fields += [f for f in found_fields if region.start <= f.start < region.end]
                taken.append((region.start, region.end))
    fields += [f for f in pairs(text) if free(f.start, f.end)]
    return Structure(tuple(regions), tuple(fields))


def forced_spans(text: str, structure: Structure) -> list[tuple[int, int, str, bool]]:
    """``(start, end, label, bare)`` for each value under a personal field (labels in the
    labels' vocabulary: ``ADDRESS`` for a street address)."""
    out = []
    turns = _speaker_turns(text, structure.fields)
    for f in structure.fields:
        label = field_type(f)
        if label is None:
            continue
        start, end, value = f.start, f.end, f.value
        weak = weak_key(f) or f in turns
        if label == "PERSON" and text[start:end] == value:
            rel_start, rel_end = name_part(value)  # "Jonas Krüger (+49 170 5558812)"
            if weak and _WORDS_AFTER.search(EMAIL_RE.sub("", value[rel_end:])):
                continue  # "User: till 2031 I think": a sentence, not a user's name
            start, end = f.start + rel_start, f.start + rel_end
            value = text[start:end]
        elif (
            text[start:end] == value
            and (lead := value_part(label, value))
            and valid_value(label, value[lead[0] : lead[1]], bare=f.bare, weak=weak)
        ):
            start, end = f.start + lead[0], f.start + lead[1]  # the writer's words after it kept
            value = text[start:end]
        if end > start and valid_value(label, value, bare=f.bare, weak=weak):
            out.append((start, end, label, f.bare))
    return out


_GOES_ON = re.compile(r"[\s,;]")  # what follows a value's end on its line


def value_part(label: str, value: str) -> tuple[int, int] | None:
    """Where the value itself ends in a field's text when the writer went on after it on the
    same line ("Passport number: 548213307 which I renewed last year", "MRN: 00482913 seen on
    Monday", "Email: a@b.org - work address"): the e-mail address, the leading date of a date of
    birth, the leading code of a number; ``None`` (the whole text is the value) where nothing
    follows it, where no such value leads (names, addresses and secrets are read whole) or where
    its shape is not one of these ("No. 548213307")."""
    if label in ("PERSON", "ADDRESS", "LOCATION", "SECRET"):
        return None
    if label == "EMAIL_ADDRESS":
        m = EMAIL_RE.search(value)
    else:
        pattern = DATE_RE if label == "DATE_OF_BIRTH" else ID_RE
        m = pattern.match(value, len(value) - len(value.lstrip()))
    rest = value[m.end() :] if m else ""
    if not m or not rest.strip() or not _GOES_ON.match(rest):
        return None  # "X-1234-567/89": the value does not end where the code seems to
    return m.start(), m.end()


def conversation_turns(text: str) -> list[tuple[int, int]]:
    """The spans of what each speaker said where ``text`` is a conversation (see
    :func:`_speaker_turns`): a value there is an answer, judged as a weak role's."""
    return [(f.start, f.end) for f in _speaker_turns(text, scan(text).fields)]


def _speaker_turns(text: str, fields: Sequence[Field]) -> set[Field]:
    """The fields that are a conversation's turns: where two lines or more open with a role's
    label, two roles at least and one of them a role that also speaks for a system or a team
    (``Agent:``, ``User:``), each such field is a turn whose value is what was said ("Agent:
    ...\\nCustomer: yes please"), judged as a weak role's."""
    labelled = [
        f
        for f in fields
        if len(f.path) == 1
        and norm_key(f.path[0]) in ROLES
        and not text[text.rfind("\n", 0, f.start) + 1 : f.start].split(f.path[0])[0].strip()
    ]
    keys = {norm_key(f.path[0]) for f in labelled}
    if len(labelled) < 2 or len(keys) < 2 or not keys & WEAK_ROLES:
        return set()
    return set(labelled)


def clip(start: int, end: int, regions: Sequence[Region]) -> list[tuple[int, int, bool]]:
    """``text[start:end]`` cut to the cells of every region it overlaps: ``(start, end,
    quoted)`` pieces, a bare JSON token it touches as one quoted piece."""
    pieces = [(start, end, False)]
    for region in sorted(regions, key=lambda r: r.start - r.end):  # outer regions first
        out: list[tuple[int, int, bool]] = []
        for a, b, quoted in pieces:
            if quoted or b <= region.start or a >= region.end:
                out.append((a, b, quoted))
                continue
            if a < region.start:
                out.append((a, region.start, False))
            if b > region.end:
                out.append((region.end, b, False))
            lo, hi = max(a, region.start), min(b, region.end)
            keys = set(region.keys)
            for cs, ce in region.cells:
                if (cs, ce) in keys and not (cs <= a and b <= ce):
                    continue  # a key is replaced only for what lies inside it alone
                if cs < hi and lo < ce:
                    out.append((*_snap(max(lo, cs), min(hi, ce), region.escapes), False))
            out += [(bs, be, True) for bs, be in region.bare if bs < hi and lo < be]
        pieces = out
    return [(a, b, q) for a, b, q in dict.fromkeys(pieces) if b > a]


def _snap(start: int, end: int, escapes: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """Widen a piece so that it never splits an escape sequence (``\\"``, ``\\u00eb``)."""
    for es, ee in escapes:
        if es < start < ee:
            start = es
        if es < end < ee:
            end = ee
    return start, end


def propagated_names(
    text: str, names: Iterable[tuple[int, int]], keys: Sequence[tuple[int, int]] = ()
) -> list[tuple[int, int]]:
    """Every other occurrence of a word of a found name (a surname or given name alone): as
    written, in capitals or title case; lower case too when the name was found in lower
    case. Titles, role words, stop words and words that are also ordinary words (``Will``,
    ``Grace``) are not carried; neither are Korean names (their particles glue on) nor
    occurrences inside a key of the structure."""
    words: set[str] = set()
    for s, e in names:
        for m in _NAME_WORD.finditer(text, s, e):
            word = m.group(0).strip("'’-")
            low = word.lower()
            if len(word) < 2 or low in STOP_WORDS or low in AMBIGUOUS or low in _NOT_PROPAGATED:
                continue
            if re.search(r"\p{Hangul}", word):
                continue
            words.add(word)
    spans = []
    for word in words:
        if word.islower():
            pattern = rf"(?i)(?<![\p{{L}}\d_'’-]){re.escape(word)}(?![\p{{L}}\d_-])"
        else:
            forms = {word, word.upper(), word[:1].upper() + word[1:].lower()}
            alternatives = "|".join(re.escape(f) for f in sorted(forms))
            pattern = rf"(?<![\p{{L}}\d_'’-])(?:{alternatives})(?![\p{{L}}\d_-])"
        for m in re.finditer(pattern, text):
            if not any(ks <= m.start() and m.end() <= ke for ks, ke in keys):
                spans.append(m.span())
    return spans


def apply_structure(
    text: str, findings: list[RecognizerResult], entities: Sequence[str]
) -> list[RecognizerResult]:
    """``findings`` on ``text`` with personal fields added, names propagated and every
    finding cut to the cells of the structures it touches (see the module)."""
    from presidio_analyzer import RecognizerResult

    structure = scan(text)
    engine_type = {"ADDRESS": "LOCATION" if "LOCATION" in entities else "ADDRESS"}
    forced = []
    for start, end, label, bare in forced_spans(text, structure):
        etype = engine_type.get(label, label)
        if etype in entities:
            forced.append(_result(RecognizerResult, etype, start, end, 0.9, quoted=bare))
    persons = [(r.start, r.end) for r in [*findings, *forced] if r.entity_type == "PERSON"]
    keys = [k for region in structure.regions for k in region.keys]
    extra = [
        _result(RecognizerResult, "PERSON", s, e, 0.6)
        for s, e in propagated_names(text, persons, keys)
        if "PERSON" in entities
    ]
    if not structure.regions and not forced and not extra:
        return drop_references(text, findings)
    spans = [(f.start, f.end) for f in forced]
    protected = [
        (f.start, f.end)
        for f in structure.fields
        if f.path and reference_key(f.path[-1]) and field_type(f) is None
    ]
    things = [(f.start, f.end) for f in structure.fields if thing_name(f)]
    out = []
    for r in [*findings, *extra]:
        for start, end, quoted in clip(r.start, r.end, structure.regions):
            if any(s <= start and end <= e for s, e in spans):
                continue  # a personal field's value is replaced whole, as that field's entity
            if r.entity_type == "PERSON" and any(s <= start and end <= e for s, e in things):
                continue  # the name of a store, hotel or product
            meta = {**(r.recognition_metadata or {}), QUOTED: quoted}
            out.append(
                RecognizerResult(r.entity_type, start, end, r.score, recognition_metadata=meta)
            )
    return forced + drop_references(text, out, protected)


def _result(
    cls: type[RecognizerResult],
    etype: str,
    start: int,
    end: int,
    score: float,
    quoted: bool = False,
) -> RecognizerResult:
    meta = {"recognizer_name": "StructuredFieldRecognizer", QUOTED: quoted}
    return cls(etype, start, end, score, recognition_metadata=meta)
