"""The learned Korean name layer's training text (tasks/pii/learned/data_ko.py): a seed gives
the same examples (in any process), every shape is there, a stated share has no name, each span
is a Hangul name of its text with the particles outside it and whole tokens to the syllable
tokenizer, and no line of a test set gets in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import regex as re

from tasks.pii.learned.data_ko import NEGATIVE_SHARE, generate, particle

SHAPES = {"chat", "tight", "mail", "note", "form", "near", "neg", "json", "csv"}
TEST_DATA = Path(__file__).resolve().parents[1] / "data"
ROOT = Path(__file__).resolve().parents[2]


def test_a_seed_gives_the_same_examples_and_another_seed_others() -> None:
    assert generate(60, seed=3) == generate(60, seed=3)
    assert generate(60, seed=3) != generate(60, seed=4)


def test_a_seed_gives_the_same_examples_in_another_process_whatever_its_hash_seed() -> None:
    script = "from tasks.pii.learned.data_ko import generate; print(repr(generate(300, seed=0)))"
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
    examples = generate(1000, seed=0)
    shapes = Counter(e.shape for e in examples)
    assert set(shapes) == SHAPES
    assert all(not e.names for e in examples if e.shape == "neg")
    assert abs(shapes["neg"] / len(examples) - NEGATIVE_SHARE) < 0.05


def test_spans_are_hangul_names_and_the_particles_stay_outside() -> None:
    for e in generate(500, seed=1):
        for start, end in e.names:
            assert re.fullmatch(r"[가-힣]{1,5}", e.text[start:end]), e.text
        assert list(e.names) == sorted(e.names)
        if e.shape == "json":
            json.loads(e.text)
        if e.shape == "tight":  # the template's spaces are gone, a topic's ("서버 점검") stay
            assert all(e.text[end : end + 1] != " " for _start, end in e.names), e.text


def test_particles_follow_the_sound_before_them() -> None:
    assert particle("아", "민준") == "아" and particle("아", "지수") == "야"
    assert particle("은", "김민수") == "는" and particle("이", "박지은") == "이"
    assert particle("i", "민준") == "이" and particle("i", "지수") == ""


def test_no_generated_text_is_a_line_of_a_test_set() -> None:
    texts = {e.text for e in generate(1000, seed=0)}
    for path in TEST_DATA.glob("pii_handwritten/*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                assert json.loads(line)["text"] not in texts, path.name


def test_the_syllable_tokenizer_keeps_the_text_and_every_name_is_whole_tokens() -> None:
    from tasks.pii.learned.ko_tokens import MARK, blank

    nlp = blank()
    doc = nlp("김민수님 안녕하세요,\n  민준이가 abc123")
    assert doc.text == "김민수님 안녕하세요,\n  민준이가 abc123"
    assert [t.norm_ for t in doc[:4]] == [MARK + "김", "민", "수", "님" + MARK]
    for e in generate(300, seed=5):
        doc = nlp(e.text)
        assert doc.text == e.text
        assert all(doc.char_span(s, end) is not None for s, end in e.names), e.text
