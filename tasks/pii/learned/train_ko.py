"""Train the learned Korean name layer: a blank Korean spaCy pipeline with the syllable
tokenizer of :mod:`tasks.pii.learned.ko_tokens` and spaCy's default ``ner`` component (its own
hash-embedding CNN token-to-vector layer), trained from scratch on generated text
(:mod:`tasks.pii.learned.data_ko`) to find people's names.

    nice -n 19 python -m tasks.pii.learned.train_ko --out models/pii-names-ko --seed 0

No Korean spaCy pipeline ships with flywheel (``ko_core_news_sm`` is not installed and its
tokenizer needs mecab), so there is nothing to fine-tune: the component starts empty. PERSON is
what it learns; the generated companies, streets, cities and products are labelled ORG, FAC,
GPE and PRODUCT so that it learns them as something else; the layer is read for PERSON alone.
One thread, a fixed seed; the scores on a dev set generated with another seed are written to
``scores.json`` in the output folder.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path
from typing import Any

from tasks.pii.learned.data_ko import generate
from tasks.pii.learned.ko_tokens import blank
from tasks.pii.learned.train import DEV_SEED_OFFSET, _examples, _prf


def train(out: Path, *, seed: int, examples: int, epochs: int = 6) -> dict[str, Any]:
    """Train, save the pipeline to ``out`` and return its card's numbers."""
    from spacy.util import fix_random_seed, minibatch

    started = time.perf_counter()
    fix_random_seed(seed)
    rng = random.Random(seed)
    nlp = blank()
    nlp.add_pipe("ner")
    train_items = generate(examples, seed=seed)
    dev_items = generate(max(examples // 5, 200), seed=seed + DEV_SEED_OFFSET)
    data = _examples(nlp, train_items)
    optimizer = nlp.initialize(lambda: data)
    losses: dict[str, float] = {}
    for _epoch in range(epochs):
        rng.shuffle(data)
        losses = {}
        for batch in minibatch(data, size=32):
            nlp.update(batch, sgd=optimizer, drop=0.2, losses=losses)
    seconds = time.perf_counter() - started
    out.mkdir(parents=True, exist_ok=True)
    nlp.meta["name"] = "pii_names_ko"
    nlp.meta["description"] = "flywheel's learned Korean name layer (read for PERSON only)"
    nlp.meta.update(author="flywheel, trained from scratch", email="", url="")
    nlp.to_disk(out)
    card = {
        "source": "blank ko, flywheel.ko_syllables.v1 tokenizer, spaCy's default ner",
        "seed": seed,
        "examples": examples,
        "aligned_examples": len(data),
        "epochs": epochs,
        "train_seconds": round(seconds, 1),
        "last_epoch_loss": round(float(losses.get("ner", 0.0)), 1),
        "dev_after": _prf(nlp, dev_items),
        "size_bytes": sum(p.stat().st_size for p in out.rglob("*") if p.is_file()),
    }
    (out / "scores.json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    return card


def main(argv: list[str] | None = None) -> None:
    """The command line: ``--out DIR --seed N --examples N [--epochs N]``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--examples", type=int, default=4000)
    parser.add_argument("--epochs", type=int, default=6)
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    card = train(args.out, seed=args.seed, examples=args.examples, epochs=args.epochs)
    print(json.dumps(card, indent=1))


if __name__ == "__main__":
    main()
