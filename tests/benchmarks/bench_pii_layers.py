"""The sealed held-out PII sets (totals only) under three name layers, in one process:
rules alone (no spaCy entities for names), the learned layer alone (the spaCy model's PERSON
entities, corroborated, and the fallback that grows them, instead of the name rules) and both
(as shipped). Identifier, address and tool-result field recognisers run in all three.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_pii_layers.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

SEALED = Path(__file__).resolve().parents[1] / "data" / "pii_sealed"
NER = {"SpacyRecognizer", "NameFallbackRecognizer"}
NAME_RULES = {
    "StructuredNameRecognizer",
    "CuedNameRecognizer",
    "SubjectNameRecognizer",
    "ObjectNameRecognizer",
    "LowerNameRecognizer",
    "KoreanNameRecognizer",
}


def main() -> None:
    import tasks.pii.registry as reg
    from infra.settings import get_settings
    from tasks.pii.engine import PiiConfig, load_engine
    from tasks.pii.evaluation import evaluate, load_labelled

    full = reg.REGISTRY
    layers = {
        "rules": tuple(e for e in full if e[1] not in NER),
        "learned": tuple(e for e in full if e[1] not in NAME_RULES),
        "both": full,
    }
    for layer, entries in layers.items():
        reg.REGISTRY = entries
        load_engine.cache_clear()
        started = time.perf_counter()
        engine = load_engine(PiiConfig.from_settings(get_settings().curate))
        load_s = time.perf_counter() - started
        for lang in ("en", "ko"):
            names = found = left = clean = altered = texts = 0
            seconds = 0.0
            for path in sorted(SEALED.glob(f"{lang}_*.jsonl")):
                report = evaluate(engine, load_labelled(path))
                names += report.values["PERSON"]
                found += report.found["PERSON"]
                left += report.structured_leaks
                clean += report.clean_texts
                altered += len(report.clean_altered)
                texts += report.lines
                seconds += report.seconds
            print(
                f"{layer:8s} {lang}  names {found}/{names} = {found / max(names, 1):.3f}  "
                f"identifiers left {left}  PII-free altered {altered}/{clean}  "
                f"load {load_s:.1f} s  {texts / seconds:.0f} texts/s",
                flush=True,
            )
    reg.REGISTRY = full


if __name__ == "__main__":
    main()
