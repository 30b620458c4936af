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

import random
import time
from pathlib import Path
from typing import Any

from tasks.pii.learned.data_ko import generate
from tasks.pii.learned.ko_tokens import blank
from tasks.pii.learned.train import DEV_SEED_OFFSET, _examples, _prf, command_line, fit, write_card


def train(out: Path, *, seed: int, examples: int, epochs: int = 6) -> dict[str, Any]:
    """Train, save the pipeline to ``out`` and return its card's numbers."""
    from spacy.util import fix_random_seed

    started = time.perf_counter()
    fix_random_seed(seed)
    rng = random.Random(seed)
    nlp = blank()
    nlp.add_pipe("ner")
    train_items = generate(examples, seed=seed)
    dev_items = generate(max(examples // 5, 200), seed=seed + DEV_SEED_OFFSET)
    data = _examples(nlp, train_items)
    losses = fit(nlp, data, nlp.initialize(lambda: data), rng=rng, epochs=epochs)
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
    }
    return write_card(out, card)


def main(argv: list[str] | None = None) -> None:
    """The command line: ``--out DIR --seed N --examples N [--epochs N]``."""
    command_line(train, __doc__ or "", epochs=6, argv=argv)


if __name__ == "__main__":
    main()
