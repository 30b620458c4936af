from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from infra.errors import ConfigError
from infra.serving.local_lm import LocalLM, extract_question, render_prompt

PII_PREAMBLES = [
    "Hi, I'm Jane Roe (jane.roe@example.com).",
    "Hi, I'm Jane Roe, card 4111 1111 1111 1111.",
    "My account is 123-45-678901 and my phone is +1 (555) 010-2233.",
    "This is Ann from 12 Main St., Springfield, IL 62704.",
]
QUESTIONS = ["What is 23+58?", "Compute 23 plus 58.", "23 + 58 = ?", "What's the sum of 23 and 58?"]


@pytest.mark.parametrize("question", QUESTIONS)
@pytest.mark.parametrize("preamble", PII_PREAMBLES)
def test_pii_preamble_does_not_reach_the_prompt(preamble: str, question: str) -> None:
    with_pii = render_prompt([{"role": "user", "content": f"{preamble} {question}"}])
    assert with_pii == render_prompt([{"role": "user", "content": question}])
    assert with_pii == f"Q: {question}\nA:"


def test_prompt_uses_the_last_user_message_and_ignores_tool_results() -> None:
    messages = [
        {"role": "system", "content": "You are a calculator agent."},
        {"role": "user", "content": "What is 1+1?"},
        {"role": "assistant", "content": "2"},
        {"role": "user", "content": [{"type": "text", "text": "Thanks. What is 23+58?"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "calculator: 23 + 58 = 81"},
    ]
    assert render_prompt(messages) == "Q: What is 23+58?\nA:"


def test_question_sentence_rule() -> None:
    assert extract_question("What is 23+58? Thanks!") == "What is 23+58?"
    assert extract_question("hello\n\n  Compute 23   plus 58.") == "Compute 23 plus 58."
    assert extract_question("  ") == ""


def test_greedy_answer_is_the_same_with_and_without_pii(tiny_lm: LocalLM) -> None:
    for question in QUESTIONS:
        msg = [{"role": "user", "content": question}]
        plain = tiny_lm.generate(render_prompt(msg), max_new_tokens=6)
        for preamble in PII_PREAMBLES:
            msg = [{"role": "user", "content": f"{preamble} {question}"}]
            assert tiny_lm.generate(tiny_lm.render(msg), max_new_tokens=6).text == plain.text


def test_generation_reports_tokens_and_logprobs(tiny_lm: LocalLM) -> None:
    gen = tiny_lm.generate("Q: What is 23+58?\nA:", max_new_tokens=5)
    assert gen.tokens_in == len("Q: What is 23+58?\nA:")
    assert 1 <= gen.tokens_out <= 5
    assert len(gen.logprobs) == gen.tokens_out
    assert all(lp <= 0.0 for lp in gen.logprobs)
    assert "\n" not in gen.text


def test_long_prompts_are_left_truncated_to_the_context(tiny_lm: LocalLM) -> None:
    long = "x" * 500 + " Q: What is 23+58?\nA:"
    gen = tiny_lm.generate(long, max_new_tokens=8)
    assert gen.tokens_in == tiny_lm.max_context - 8
    same_tail = tiny_lm.generate("y" * 300 + long[-(tiny_lm.max_context - 8) :], max_new_tokens=8)
    assert gen.text == same_tail.text


def test_batch_greedy_matches_single_greedy(tiny_lm: LocalLM) -> None:
    prompts = [render_prompt([{"role": "user", "content": q}]) for q in QUESTIONS] + ["Q: 7?\nA:"]
    batch = tiny_lm.generate_batch(prompts, max_new_tokens=6)
    singles = [tiny_lm.generate(p, max_new_tokens=6) for p in prompts]
    assert [g.text for g in batch] == [g.text for g in singles]
    assert [g.tokens_in for g in batch] == [g.tokens_in for g in singles]


def test_seeded_sampling_is_reproducible(tiny_lm: LocalLM) -> None:
    def sample(seed: int) -> str:
        return tiny_lm.generate("Q: hi\nA:", temperature=1.5, max_new_tokens=12, seed=seed).text

    assert sample(1) == sample(1)
    assert len({sample(s) for s in range(6)}) > 1


def test_concurrent_calls_are_safe_and_equal_to_sequential(tiny_lm: LocalLM) -> None:
    prompts = [f"Q: What is {a}+{a + 1}?\nA:" for a in range(10, 26)]
    sequential = [tiny_lm.generate(p, max_new_tokens=6).text for p in prompts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        concurrent = list(pool.map(lambda p: tiny_lm.generate(p, max_new_tokens=6).text, prompts))
    assert concurrent == sequential


def test_loading_a_missing_model_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="flywheel bootstrap"):
        LocalLM.load(tmp_path / "nope")


def test_torch_threads_come_back_whatever_order_overlapping_generations_end_in() -> None:
    """A generation (1 thread) and an evaluation (3 threads) overlap in two threads and end in
    the order they started: torch must get its thread count back (before, the second restored
    the first's 1, and what ran next, training, ran on one thread)."""
    import threading

    import torch

    from infra.serving.local_lm import intra_op_threads

    torch.set_num_threads(2)
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with intra_op_threads(1):
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with intra_op_threads(3):
            second_in.set()
            first_out.wait(5)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert torch.get_num_threads() == 2
    with intra_op_threads(2), intra_op_threads(1):  # nested in one thread: the inner one wins
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
