"""The demo base model's pre-training answers: the reference, or with ``hedge_share`` a
share of hedges ("81 or 82") that the golden verifier rejects (the exploitable-judge demo)."""

from __future__ import annotations

import random

import pytest

from infra.settings import Settings
from tasks.demo import domain
from tasks.demo.bootstrap import input_hash
from tasks.demo.pretrain import BootstrapConfig, _batch, build_tokenizer, hedge_answers, hedged


def test_a_hedge_names_the_right_number_and_a_neighbour_and_the_verifier_rejects_it() -> None:
    rng = random.Random(0)
    item = domain.sample_question(rng)
    for _ in range(20):
        text = hedged(item.reference, rng)
        first, word, second = text.split()
        assert word == "or" and item.reference in (first, second)
        assert abs(int(first) - int(second)) == 1
        assert domain.verify(item, text) == 0.0
    assert domain.verify(item, item.reference) == 1.0


def test_hedge_share_zero_draws_nothing_and_a_share_hedges_about_that_share() -> None:
    items = [domain.sample_question(random.Random(i)) for i in range(400)]
    rng = random.Random(7)
    assert hedge_answers(items, rng, share=0.0) == {}
    assert rng.random() == random.Random(7).random()  # the default v0 sees the same stream
    hedges = hedge_answers(items, random.Random(7), share=0.2)
    assert 40 <= len(hedges) <= 120
    assert all(items[i].reference in text.split() for i, text in hedges.items())


def test_the_hedge_is_what_the_model_is_trained_to_answer() -> None:
    tok = build_tokenizer(128)
    item = domain.sample_question(random.Random(3))
    hedge = hedged(item.reference, random.Random(1))
    _, labels = _batch(tok, [item, item], {1: hedge})
    answers = [
        tok.decode([t for t in row.tolist() if t >= 0], skip_special_tokens=True) for row in labels
    ]
    assert answers == [f" {item.reference}", f" {hedge}"]


@pytest.mark.parametrize("share", [0.0, 0.2])
def test_the_hedge_share_is_part_of_the_cache_key_only_when_set(share: float) -> None:
    plain = input_hash(BootstrapConfig(), 0)
    assert (input_hash(BootstrapConfig(hedge_share=share), 0) == plain) is (share == 0.0)


def test_the_setting_is_validated() -> None:
    assert Settings(bootstrap_hedge_share=0.2).bootstrap_hedge_share == 0.2
    with pytest.raises(ValueError):
        Settings(bootstrap_hedge_share=1.5)
