"""The learned Korean name layer (models/pii-names-ko) measured three ways, in one process:
rules alone (the anonymiser as shipped, the layer off), the learned layer alone (the layer
instead of the Korean name rules, ``KoreanNameRecognizer``, which also reads names in tool
results) and the combination (as shipped plus the layer). Identifier, address and other
recognisers run in all of them. A fourth row takes away the combination's kiwi veto (a learned
name kept only where kiwi's morphemes start and end with it and it holds no ordinary word kiwi
knows) to show what it is worth. Sets: the Korean sealed sets (totals only), the Korean
hand-written sets and the Faker-generated Korean sets of ``tests/data/pii_regression.py``.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_pii_learned_ko.py
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

DATA = Path(__file__).resolve().parents[1] / "data"
KOREAN_NAMES = {"KoreanNameRecognizer"}


def _sets() -> dict[str, list]:
    from tasks.pii.evaluation import load_labelled
    from tests.data.pii_regression import labelled_sets

    generated = {k: v for k, v in labelled_sets().items() if k.startswith("faker/")}
    return {
        "sealed ko": [
            i for p in sorted(DATA.glob("pii_sealed/ko_*.jsonl")) for i in load_labelled(p)
        ],
        "handwritten ko": [
            i for p in sorted(DATA.glob("pii_handwritten/ko_*.jsonl")) for i in load_labelled(p)
        ],
        "generated ko": [i for name, items in generated.items() if "/ko_" in name for i in items],
    }


def main() -> None:
    """Print one row per layer and set group (totals only)."""
    import tasks.pii.ner.learned_names as layer_en
    import tasks.pii.ner.learned_names_ko as layer
    import tasks.pii.registry as reg
    from infra.settings import get_settings
    from tasks.pii.engine import PiiConfig, anonymize_texts, load_engine, load_spacy
    from tasks.pii.evaluation import evaluate

    sets = _sets()
    full = reg.REGISTRY
    shipped = PiiConfig.from_settings(get_settings().curate)
    spans = layer.learned_name_spans_ko
    layers = {
        "rules alone": (full, False),
        "learned alone": (tuple(e for e in full if e[1] not in KOREAN_NAMES), True),
        "combination": (full, True),
        "comb. no veto": (full, True),
    }
    load_engine(replace(shipped, learned_names=True))  # imports and one-time loads, untimed
    for name, (entries, learned) in layers.items():
        reg.REGISTRY = entries
        layer.learned_name_spans_ko = (  # type: ignore[assignment]
            spans if name != "comb. no veto" else lambda nlp, text, _tokenize=None: spans(nlp, text)
        )
        for cached in (load_engine, load_spacy, layer.load_layer, layer_en.load_layer):
            cached.cache_clear()  # each layer loads its pipelines afresh
        started = time.perf_counter()
        engine = load_engine(replace(shipped, learned_names=learned))
        load_s = time.perf_counter() - started
        anonymize_texts(engine, ["준비: 주문번호 12345 확인 부탁드려요"])
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
    reg.REGISTRY, layer.learned_name_spans_ko = full, spans  # type: ignore[assignment]


if __name__ == "__main__":
    main()
