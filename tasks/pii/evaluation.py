"""``flywheel pii-eval``: the anonymiser on a user's own labelled file.

Each line of the file is ``{"text": ..., "entities": [{"type": T, "value": V}, ...]}`` with
every ``V`` an exact substring of the text; a line without entities measures precision (it
should come back unchanged). A value is *found* when the anonymiser replaced it: for an
identifier every letter and digit of it, for a name every word but a title, for an address
at least 80 % of its letters and digits (a trailing country may stay). Each value counts under
its labelled type whatever placeholder replaced it; a different placeholder is reported as a
type confusion. The report holds line numbers and types; the leaked values themselves are
kept for the caller to print only when asked (they are personal data).

Labels may use Presidio's own entity names (``IBAN_CODE``, ``US_BANK_NUMBER``,
``US_DRIVER_LICENSE``, ``US_PASSPORT``, ``LOCATION``...): they are counted under ours
(:data:`LABEL_ALIASES`). Any other type is measured under its own name as an identifier that
must not survive (every letter and digit replaced). A second file of texts without personal
data (``--clean``) gives per-type precision: which types fired on text that has none, and how
often.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from infra.errors import ConfigError
from tasks.pii.engine import PiiEngine, Redaction, anonymize_texts
from tasks.pii.lexicon import word_list

TYPES = [
    "PERSON",
    "EMAIL_ADDRESS",
    "PHONE_NUMBER",
    "ADDRESS",
    "DATE_OF_BIRTH",
    "CREDIT_CARD",
    "BANK_ACCOUNT",
    "US_SSN",
    "KR_RRN",
    "KR_FRN",
    "PASSPORT",
    "DRIVER_LICENSE",
    "MEDICAL_ID",
    "SECRET",
    "IP_ADDRESS",
    "KR_CAR_PLATE",
    "UK_NINO",
    "KR_BRN",
]
UNSTRUCTURED = ("PERSON", "ADDRESS")
# the engine's entity names -> the labels' vocabulary
ENGINE_TYPES = {
    "LOCATION": "ADDRESS",
    "ACCOUNT_NUMBER": "BANK_ACCOUNT",
    "IBAN_CODE": "BANK_ACCOUNT",
}
# other tools' (Presidio's) entity names -> ours; the report says which it mapped
LABEL_ALIASES = {
    **ENGINE_TYPES,
    "US_BANK_NUMBER": "BANK_ACCOUNT",
    "US_DRIVER_LICENSE": "DRIVER_LICENSE",
    "IT_DRIVER_LICENSE": "DRIVER_LICENSE",
    "KR_DRIVER_LICENSE": "DRIVER_LICENSE",
    "US_PASSPORT": "PASSPORT",
    "IT_PASSPORT": "PASSPORT",
    "IN_PASSPORT": "PASSPORT",
    "KR_PASSPORT": "PASSPORT",
    "UK_NHS": "MEDICAL_ID",
    "AU_MEDICARE": "MEDICAL_ID",
    "EMAIL": "EMAIL_ADDRESS",
    "PHONE": "PHONE_NUMBER",
    "SSN": "US_SSN",
}
_TYPE_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
_TITLES = frozenset(word_list("evaluation_titles"))


@dataclass(frozen=True)
class Labelled:
    """One line of a labelled file: its text and ``(type, value)`` pairs."""

    line: int
    text: str
    entities: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Leak:
    """A labelled value still in the anonymised text (``value`` is personal data: print it
    only when the user asks)."""

    line: int
    type: str
    value: str


@dataclass
class EvalReport:
    """What :func:`evaluate` measured on one file."""

    lines: int = 0
    values: Counter[str] = field(default_factory=Counter)
    found: Counter[str] = field(default_factory=Counter)
    leaks: list[Leak] = field(default_factory=list)
    confusions: Counter[tuple[str, str]] = field(default_factory=Counter)
    clean_texts: int = 0
    clean_altered: list[int] = field(default_factory=list)
    seconds: float = 0.0
    chars: int = 0
    mapped: Counter[tuple[str, str]] = field(default_factory=Counter)  # (theirs, ours): values
    measured_as_identifier: Counter[str] = field(default_factory=Counter)  # unknown types
    # findings (engine types in the labels' vocabulary) that hit a labelled value, that hit
    # none in a labelled text, and on texts without personal data (with how many texts)
    hits: Counter[str] = field(default_factory=Counter)
    stray: Counter[str] = field(default_factory=Counter)
    fired_clean: Counter[str] = field(default_factory=Counter)
    fired_clean_texts: Counter[str] = field(default_factory=Counter)
    clean_file_texts: int = 0  # of clean_texts, from the --clean file
    clean_file_altered: list[int] = field(default_factory=list)
    sealed: bool = False  # totals only: no line numbers, no values

    @property
    def structured_leaks(self) -> int:
        """Leaked values of every type but names and addresses."""
        return sum(1 for leak in self.leaks if leak.type not in UNSTRUCTURED)

    def recall(self) -> dict[str, float]:
        """Found / labelled, per type (types that occur in the file)."""
        return {t: self.found[t] / n for t, n in sorted(self.values.items()) if n}

    def precision(self) -> dict[str, float]:
        """Per type the anonymiser replaced: findings on a labelled value / all its findings
        (those on texts without personal data and off the labels of labelled texts)."""
        fired = self.hits + self.stray + self.fired_clean
        return {t: self.hits[t] / n for t, n in sorted(fired.items()) if n}

    def _clean_summary(self) -> dict[str, Any]:
        fired = {
            t: {"findings": n, "texts": self.fired_clean_texts[t]}
            for t, n in self.fired_clean.most_common()
        }
        return {
            "label_types_mapped": {a: b for (a, b), _n in sorted(self.mapped.items())},
            "measured_as_identifier": sorted(self.measured_as_identifier),
            "precision_by_type": {t: round(p, 4) for t, p in self.precision().items()},
            "clean_fired_by_type": fired,
            "clean_file_texts": self.clean_file_texts,
            "clean_file_altered_lines": self.clean_file_altered,
        }

    def summary(self, *, show_values: bool) -> dict[str, Any]:
        """The report as plain fields (leaked values only with ``show_values``; a sealed
        report names no line and no value, only how many leaked of each type)."""
        if self.sealed:
            return self._sealed_summary()
        leaks = [
            {"line": leak.line, "type": leak.type, **({"value": leak.value} if show_values else {})}
            for leak in self.leaks
        ]
        total = sum(self.values.values())
        return {
            "lines": self.lines,
            "values": total,
            "found": sum(self.found.values()),
            "recall": round(sum(self.found.values()) / total, 4) if total else None,
            "recall_by_type": {t: round(r, 4) for t, r in self.recall().items()},
            "leaks": len(self.leaks),
            "structured_leaks": self.structured_leaks,
            "leaked": leaks,
            "type_confusions": [
                {"type": a, "replaced_as": b, "count": n} for (a, b), n in self.confusions.items()
            ],
            "clean_texts": self.clean_texts,
            "clean_altered": len(self.clean_altered),
            "clean_altered_rate": (
                round(len(self.clean_altered) / self.clean_texts, 4) if self.clean_texts else None
            ),
            "clean_altered_lines": self.clean_altered,
            **self._clean_summary(),
            "seconds": round(self.seconds, 3),
            "texts_per_s": round(self.lines / self.seconds, 1) if self.seconds else None,
            "chars_per_s": round(self.chars / self.seconds) if self.seconds else None,
        }

    def _sealed_summary(self) -> dict[str, Any]:
        full = replace(self, sealed=False, leaks=[], clean_altered=[], clean_file_altered=[])
        return {
            **full.summary(show_values=False),
            "sealed": True,
            "leaks": len(self.leaks),
            "structured_leaks": self.structured_leaks,
            "leaks_by_type": dict(sorted(Counter(leak.type for leak in self.leaks).items())),
            "clean_altered": len(self.clean_altered),
            "clean_altered_rate": (
                round(len(self.clean_altered) / self.clean_texts, 4) if self.clean_texts else None
            ),
            "clean_file_altered": len(self.clean_file_altered),
        }


def is_sealed(path: Path) -> bool:
    """Whether ``path`` is a sealed held-out set (its folder holds a ``SEALED`` file)."""
    return (path.parent / "SEALED").is_file()


def load_labelled(path: Path) -> list[Labelled]:
    """The lines of a labelled JSONL file.

    Raises:
        ConfigError: a line is not a JSON object of that shape, or a value is not in its text
            (named by line number, never by content).
    """
    items = []
    try:
        raw = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read ({type(exc).__name__})") from exc
    for number, line in enumerate(raw, start=1):
        if line.strip():
            items.append(_parse(path, number, line))
    if not items:
        raise ConfigError(f"{path}: no labelled lines")
    return items


def _parse(path: Path, number: int, line: str) -> Labelled:
    where = f"{path}:{number}"
    try:
        obj = json.loads(line)
    except json.JSONDecodeError:
        raise ConfigError(f"{where}: not JSON") from None
    if not isinstance(obj, dict):
        raise ConfigError(f'{where}: expected {{"text": str, "entities": [...]}}')
    text, entities = obj.get("text"), obj.get("entities", [])
    if not isinstance(text, str) or not isinstance(entities, list):
        raise ConfigError(f'{where}: expected {{"text": str, "entities": [...]}}')
    pairs = []
    for ent in entities:
        if not isinstance(ent, dict) or not isinstance(ent.get("value"), str):
            raise ConfigError(f'{where}: each entity needs "type" and "value"')
        etype = "_".join(str(ent.get("type", "")).upper().replace("-", " ").split())
        if not _TYPE_NAME.fullmatch(etype):
            raise ConfigError(f'{where}: each entity needs "type" and "value"')
        if not ent["value"] or ent["value"] not in text:
            raise ConfigError(f"{where}: a {etype} value is not an exact substring of the text")
        pairs.append((etype, ent["value"]))
    return Labelled(number, text, tuple(pairs))


def load_clean(path: Path) -> list[Labelled]:
    """The texts of a ``--clean`` file: JSONL ``{"text": ...}`` lines of text that holds no
    personal data.

    Raises:
        ConfigError: a line is malformed, or carries labels (named by line number).
    """
    items = load_labelled(path)
    labelled = [i.line for i in items if i.entities]
    if labelled:
        raise ConfigError(
            f"{path}:{labelled[0]}: a --clean file holds texts without personal data; this "
            "line has entities (put labelled lines in the labelled file)"
        )
    return items


def evaluate(
    engine: PiiEngine, items: Sequence[Labelled], clean: Sequence[Labelled] = ()
) -> EvalReport:
    """Anonymise every text (one batch, as curate does) and score it against its labels;
    ``clean`` texts (no personal data) count only towards precision."""
    every = [*items, *clean]
    report = EvalReport(lines=len(every), chars=sum(len(i.text) for i in every))
    started = time.perf_counter()
    redactions = anonymize_texts(engine, [i.text for i in every])
    report.seconds = time.perf_counter() - started
    for n, (item, red) in enumerate(zip(every, redactions, strict=True)):
        if not item.entities:
            _score_clean(report, item, red, from_clean_file=n >= len(items))
        else:
            _score_labelled(report, item, red)
    return report


def _score_clean(
    report: EvalReport, item: Labelled, red: Redaction, *, from_clean_file: bool
) -> None:
    report.clean_texts += 1
    report.clean_file_texts += from_clean_file
    if red.text != item.text:
        report.clean_altered.append(item.line)
        if from_clean_file:
            report.clean_file_altered.append(item.line)
    fired = Counter(ENGINE_TYPES.get(t, t) for _s, _e, t in red.spans)
    report.fired_clean.update(fired)
    report.fired_clean_texts.update(fired.keys())


def _score_labelled(report: EvalReport, item: Labelled, red: Redaction) -> None:
    labelled: list[tuple[int, int]] = []
    for theirs, value in item.entities:
        etype = LABEL_ALIASES.get(theirs, theirs)
        if etype != theirs:
            report.mapped[(theirs, etype)] += 1
        if etype not in TYPES:
            report.measured_as_identifier[etype] += 1
        report.values[etype] += 1
        start = item.text.find(value)
        while start >= 0:
            labelled.append((start, start + len(value)))
            start = item.text.find(value, start + 1)
        got = _replaced_as(item.text, value, etype, red.spans)
        if got is None:
            report.leaks.append(Leak(item.line, etype, value))
            continue
        report.found[etype] += 1
        if got != etype and etype in TYPES:  # any placeholder will do for a type we lack
            report.confusions[(etype, got)] += 1
    for s, e, t in red.spans:
        on_label = any(s < end and e > begin for begin, end in labelled)
        (report.hits if on_label else report.stray)[ENGINE_TYPES.get(t, t)] += 1


def _replaced_as(
    text: str, value: str, etype: str, spans: Sequence[tuple[int, int, str]]
) -> str | None:
    """The (label-vocabulary) type that replaced every occurrence of ``value``, or ``None``
    when one of them survives."""
    got = None
    start = text.find(value)
    while start >= 0:
        end = start + len(value)
        hits = [(s, e, t) for s, e, t in spans if s < end and e > start]
        covered = {i for s, e, _t in hits for i in range(max(s, start), min(e, end))}
        if not _found(text, start, end, etype, covered):
            return None
        best = max(hits, key=lambda h: min(h[1], end) - max(h[0], start))
        got = ENGINE_TYPES.get(best[2], best[2])
        start = text.find(value, start + 1)
    return got


def _found(text: str, start: int, end: int, etype: str, covered: set[int]) -> bool:
    if etype == "PERSON":
        return all(_word_covered(w, covered) for w in _words(text, start, end))
    needed = [i for i in range(start, end) if text[i].isalnum()]
    if not needed:
        return True
    hit = sum(i in covered for i in needed)
    return hit >= 0.8 * len(needed) if etype == "ADDRESS" else hit == len(needed)


def _words(text: str, start: int, end: int) -> list[range]:
    words, i = [], start
    while i < end:
        if text[i].isalnum():
            j = i
            while j < end and (text[j].isalnum() or text[j] in "'’."):
                j += 1
            if text[i:j].lower().rstrip(".") not in {t.rstrip(".") for t in _TITLES}:
                words.append(range(i, j))
            i = j
        else:
            i += 1
    return words


def _word_covered(word: range, covered: set[int]) -> bool:
    return all(i in covered for i in word)
