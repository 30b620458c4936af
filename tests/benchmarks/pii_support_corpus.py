"""Recall of the PII engine on the Korean and English support-ticket corpora (issue 17).

    PYTHONPATH=. python -m tests.benchmarks.pii_support_corpus [dev|heldout] [N]

Prints removed/planted per kind and the ordinary Korean words that were (wrongly) replaced.
"""

from __future__ import annotations

import sys
import time
from collections import Counter

from infra.settings import CurateSettings
from tasks.pii.engine import PiiConfig, anonymize_texts, load_engine
from tests.data import support_corpus as sc


def main(family: str = "heldout", n: int = 300) -> None:
    engine = load_engine(PiiConfig.from_settings(CurateSettings()))
    for name, gen, gone in (
        ("ko", sc.korean, sc.ko_value_gone),
        ("en", sc.english_gaps, sc.en_value_gone),
    ):
        corpus = gen(n, seed=7, family=family)  # type: ignore[operator]
        started = time.perf_counter()
        red = anonymize_texts(engine, [c.text for c in corpus])
        total: Counter[str] = Counter()
        ok: Counter[str] = Counter()
        for item, r in zip(corpus, red, strict=True):
            for kind, value in item.labels:
                total[kind] += 1
                ok[kind] += gone(kind, value, r.text)
        took = time.perf_counter() - started
        print(name, family, f"{took:.1f}s", {k: f"{ok[k]}/{total[k]}" for k in sorted(total)})
    ordinary = anonymize_texts(engine, sc.KO_ORDINARY)
    print(
        "ordinary words replaced:",
        [t for t, r in zip(sc.KO_ORDINARY, ordinary, strict=True) if r.entities],
    )


if __name__ == "__main__":
    main(
        sys.argv[1] if len(sys.argv) > 1 else "heldout",
        int(sys.argv[2]) if len(sys.argv) > 2 else 300,
    )
