"""Korean anonymisation throughput per character against English, measured in the same run on
the hand-written corpora (tests/data/pii_handwritten: messages with and without personal
data, as curate sees them), with the default curate settings (both pipelines, every
recogniser). Each language is timed on a warm engine, best of ``--rounds`` interleaved rounds
(the machine is shared). Goal: Korean chars/s >= English chars/s / 1.5.

    PYTHONPATH=$PWD .venv/bin/python tests/benchmarks/bench_pii_korean.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
DATA = ROOT / "tests" / "data" / "pii_handwritten"


def corpus(lang: str) -> list[str]:
    """Every text of ``<lang>_pii.jsonl`` and ``<lang>_clean.jsonl``."""
    return [
        json.loads(line)["text"]
        for name in (f"{lang}_pii.jsonl", f"{lang}_clean.jsonl")
        for line in (DATA / name).read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def main() -> None:
    """Print chars/s per language and the English/Korean ratio."""
    from infra.settings import CurateSettings
    from tasks.pii.engine import PiiConfig, anonymize_texts, load_engine

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    engine = load_engine(PiiConfig.from_settings(CurateSettings()))
    texts = {lang: corpus(lang) for lang in ("en", "ko")}
    for lang_texts in texts.values():
        anonymize_texts(engine, lang_texts[:20])  # lazy loads (suffix list, kiwi) out of the timing
    best = {lang: float("inf") for lang in texts}
    for r in range(args.rounds):
        for lang, lang_texts in texts.items():
            batch = [f"{t} #{r}" for t in lang_texts]  # new strings: no cache helps a later round
            started = time.perf_counter()
            anonymize_texts(engine, batch)
            best[lang] = min(best[lang], time.perf_counter() - started)
    rate = {lang: sum(len(t) for t in texts[lang]) / best[lang] for lang in texts}
    for lang in texts:
        print(f"{lang}: {len(texts[lang])} texts, {rate[lang]:,.0f} chars/s")
    print(f"English/Korean per-char time ratio: {rate['en'] / rate['ko']:.2f} (goal <= 1.5)")


if __name__ == "__main__":
    main()
