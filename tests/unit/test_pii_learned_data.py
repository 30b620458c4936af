"""The learned name layer's training text (tasks/pii/learned/data.py): a seed gives the same
examples (in any process), every shape users write is there, a stated share has no name at all, each span is a
name of the text, and no non-Latin name and no line of a test set gets in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import regex as re

from tasks.pii.learned.data import NEGATIVE_SHARE, generate, name_locales

SHAPES = {"chat", "lower", "mail", "note", "form", "near", "neg", "json", "csv"}
TEST_DATA = Path(__file__).resolve().parents[1] / "data"
ROOT = Path(__file__).resolve().parents[2]


def test_a_seed_gives_the_same_examples_and_another_seed_others() -> None:
    assert generate(60, seed=3) == generate(60, seed=3)
    assert generate(60, seed=3) != generate(60, seed=4)


def test_a_seed_gives_the_same_examples_in_another_process_whatever_its_hash_seed() -> None:
    script = "from tasks.pii.learned.data import generate; print(repr(generate(300, seed=0)))"
    outs = {
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outs) == 1


def test_every_shape_is_there_and_the_negatives_at_their_share() -> None:
    examples = generate(800, seed=0)
    shapes = Counter(e.shape for e in examples)
    assert set(shapes) == SHAPES
    negatives = sum(not e.names for e in examples if e.shape == "neg")
    assert negatives == shapes["neg"]
    assert abs(shapes["neg"] / len(examples) - NEGATIVE_SHARE) < 0.05


def test_spans_are_names_in_their_text_and_never_a_street_or_a_company() -> None:
    for e in generate(400, seed=1):
        for start, end in e.names:
            name = e.text[start:end]
            assert name.strip() == name and name
            assert re.fullmatch(r"[\p{Latin}\s.'’-]+", name), e.shape
        assert list(e.names) == sorted(e.names)
        if e.shape == "near":
            assert e.names  # a person beside the place or company, which stays untagged


def test_structured_results_parse_and_lower_case_chat_is_lower_case() -> None:
    examples = generate(400, seed=2)
    for e in examples:
        if e.shape == "json":
            json.loads(e.text)
        if e.shape == "lower":
            assert e.text == e.text.lower()


def test_names_come_from_many_latin_locales_and_the_romanised_ones() -> None:
    locales = name_locales()
    assert len(locales) > 40
    assert {"ja_JP", "zh_CN", "en_US", "vi_VN"} <= set(locales)
    assert "ru_RU" not in locales and "ko_KR" not in locales


def test_no_generated_text_is_a_line_of_a_test_set() -> None:
    texts = {e.text for e in generate(1000, seed=0)}
    for path in TEST_DATA.glob("pii_handwritten/*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                assert json.loads(line)["text"] not in texts, path.name
