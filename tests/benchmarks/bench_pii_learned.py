"""The learned English name layer (models/pii-names-en) measured three ways, in one process:
rules alone (the anonymiser as shipped: name rules and the main spaCy model's corroborated
names, the layer off), the learned layer alone (the layer instead of every English name
recogniser) and the combination (as shipped plus the layer). Identifier, address and
tool-result field recognisers run in all three. A fourth row takes away the combination's
veto (a learned name the main model calls a place, an organisation or a product is dropped)
to show what it is worth. Sets: the English sealed sets (totals only),
the English hand-written sets and the Faker-generated English sets of
``tests/data/pii_regression.py``.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_pii_learned.py
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

DATA = Path(__file__).resolve().parents[1] / "data"
ENGLISH_NAMES = {
    "SpacyRecognizer",
    "NameFallbackRecognizer",
    "StructuredNameRecognizer",
    "CuedNameRecognizer",
    "SubjectNameRecognizer",
    "ObjectNameRecognizer",
    "LowerNameRecognizer",
}


def _sets() -> dict[str, list]:
    from tasks.pii.evaluation import load_labelled
    from tests.data.pii_regression import labelled_sets

    generated = {k: v for k, v in labelled_sets().items() if k.startswith("faker/")}
    return {
        "sealed en": [
            i for p in sorted(DATA.glob("pii_sealed/en_*.jsonl")) for i in load_labelled(p)
        ],
        "handwritten en": [
            i for p in sorted(DATA.glob("pii_handwritten/en_*.jsonl")) for i in load_labelled(p)
        ],
        "generated en": [
            i for name, items in generated.items() if "/ko_" not in name for i in items
        ],
    }


def main() -> None:
    """Print one row per layer and set group (totals only)."""
    import tasks.pii.ner.learned_names as layer
    import tasks.pii.registry as reg
    from infra.settings import get_settings
    from tasks.pii.engine import PiiConfig, anonymize_texts, load_engine, load_spacy
    from tasks.pii.evaluation import evaluate

    sets = _sets()
    full = reg.REGISTRY
    shipped = PiiConfig.from_settings(get_settings().curate)
    veto = layer.NOT_PEOPLE
    layers = {
        "rules alone": (full, False, veto),
        "learned alone": (tuple(e for e in full if e[1] not in ENGLISH_NAMES), True, veto),
        "combination": (full, True, veto),
        "comb. no veto": (full, True, frozenset()),
    }
    load_engine(replace(shipped, learned_names=True))  # imports and one-time loads, untimed
    for name, (entries, learned, not_people) in layers.items():
        reg.REGISTRY, layer.NOT_PEOPLE = entries, not_people
        for cached in (load_engine, load_spacy, layer.load_layer):
            cached.cache_clear()  # each layer loads its pipelines afresh
        started = time.perf_counter()
        engine = load_engine(replace(shipped, learned_names=learned))
        load_s = time.perf_counter() - started
        anonymize_texts(engine, ["warm-up: ask Jane Doe about order 12345"])
        for group, items in sets.items():
            report = evaluate(engine, items)
            names, found = report.values["PERSON"], report.found["PERSON"]
            print(
                f"{name:13s} {group:14s} names {found}/{names} = {found / max(names, 1):.3f}  "
                f"identifiers left {report.structured_leaks}  "
                f"PII-free altered {len(report.clean_altered)}/{report.clean_texts}  "
                f"load {load_s:.1f} s  {report.lines / report.seconds:.0f} texts/s",
                flush=True,
            )
    reg.REGISTRY, layer.NOT_PEOPLE = full, veto


if __name__ == "__main__":
    main()
