"""Every labelled PII set in the repository, measured the same way, against a committed
baseline (``pii_baseline.json`` beside this file), so that a rule added for one class cannot
break another unnoticed.

The sets: the hand-written corpora (``pii_handwritten/*.jsonl``), the sealed held-out sets
(``pii_sealed/*.jsonl``, totals only) and the Faker-generated ones (``pii_corpus.generate``,
``support_corpus.korean`` and ``support_corpus.english_gaps``, each in its ``dev`` and
``heldout`` template family, fixed seeds). Each is scored by ``tasks.pii.evaluation`` (what
``flywheel pii-eval`` prints): recall per type and the share of PII-free texts altered.

After a change that moves the figures *up* (or a new set), rewrite the baseline and commit it
with the change that earned it:

    PYTHONPATH=. .venv/bin/python tests/data/pii_regression.py --write
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BASELINE = HERE / "pii_baseline.json"
FILE_SETS = sorted([*HERE.glob("pii_handwritten/*.jsonl"), *HERE.glob("pii_sealed/*.jsonl")])
# the generators' kinds -> pii-eval's types (an unknown kind is measured as an identifier)
KINDS = {
    "EMAIL": "EMAIL_ADDRESS",
    "PHONE": "PHONE_NUMBER",
    "CARD": "CREDIT_CARD",
    "SSN": "US_SSN",
    "IBAN": "BANK_ACCOUNT",
    "RRN": "KR_RRN",
    "BRN": "KR_BRN",
    "NINO": "UK_NINO",
}
GENERATED_SIZE = 150


def _generated() -> dict[str, Callable[[], list[Any]]]:
    from tests.data.pii_corpus import generate
    from tests.data.support_corpus import english_gaps, korean

    sets: dict[str, Callable[[], list[Any]]] = {}
    for family in ("dev", "heldout"):
        sets[f"faker/mixed_{family}"] = lambda f=family: generate(GENERATED_SIZE, seed=7, family=f)
        sets[f"faker/ko_{family}"] = lambda f=family: korean(GENERATED_SIZE, seed=7, family=f)
        sets[f"faker/en_gaps_{family}"] = lambda f=family: english_gaps(
            GENERATED_SIZE, seed=7, family=f
        )
    return sets


def labelled_sets() -> dict[str, list[Any]]:
    """Every set by name, as ``tasks.pii.evaluation.Labelled`` items."""
    from tasks.pii.evaluation import Labelled, load_labelled

    sets: dict[str, list[Any]] = {str(p.relative_to(HERE)): load_labelled(p) for p in FILE_SETS}
    for name, make in _generated().items():
        sets[name] = [
            Labelled(n, t.text, tuple((KINDS.get(k, k), v) for k, v in t.labels))
            for n, t in enumerate(make(), start=1)
        ]
    return sets


def measure() -> dict[str, dict[str, Any]]:
    """Per set: labelled values and recall per type, PII-free texts and the share altered
    (the configured anonymiser, every language, as curate runs it)."""
    from infra.settings import get_settings
    from tasks.pii.engine import PiiConfig, load_engine
    from tasks.pii.evaluation import evaluate

    engine = load_engine(PiiConfig.from_settings(get_settings().curate))
    out = {}
    for name, items in labelled_sets().items():
        report = evaluate(engine, items)
        out[name] = {
            "values": dict(sorted(report.values.items())),
            "recall": {t: round(r, 4) for t, r in report.recall().items()},
            "clean_texts": report.clean_texts,
            "clean_altered_share": (
                round(len(report.clean_altered) / report.clean_texts, 4)
                if report.clean_texts
                else 0.0
            ),
        }
    return out


def regressions(baseline: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What got worse, one line per set and type (no values, no line numbers): a type's
    recall below the baseline, the altered share above it, a set or type the baseline has
    that is no longer measured, or a set the baseline lacks."""
    worse = []
    for name in sorted(set(baseline) | set(now)):
        if name not in now:
            worse.append(f"{name}: in the baseline but no longer measured")
            continue
        if name not in baseline:
            worse.append(f"{name}: not in the baseline (rewrite it: --write)")
            continue
        was, got = baseline[name], now[name]
        for etype, recall in was["recall"].items():
            if got["recall"].get(etype, -1.0) < recall:
                worse.append(
                    f"{name}: {etype} recall {recall} -> {got['recall'].get(etype, 'missing')}"
                )
        if got["clean_altered_share"] > was["clean_altered_share"]:
            worse.append(
                f"{name}: PII-free texts altered {was['clean_altered_share']}"
                f" -> {got['clean_altered_share']}"
            )
    return worse


if __name__ == "__main__":
    now = measure()
    if "--write" in sys.argv:
        BASELINE.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    base = json.loads(BASELINE.read_text(encoding="utf-8")) if BASELINE.exists() else {}
    for line in regressions(base, now):
        print(line)
