"""The llama profile's chat template: every message kind the agent sends, rendered the same
whether tool-call arguments come as the OpenAI string (a trace) or parsed (vLLM)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tasks.demo.llama_profile import END, build_tokenizer


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return build_tokenizer(256)


def conversation(arguments: Any) -> list[dict[str, Any]]:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "calculator", "arguments": arguments},
    }
    return [
        {"role": "system", "content": "Answer with the number."},
        {"role": "user", "content": "What is 23+58?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "calculator: 23 + 58 = 81"},
    ]


def test_the_template_renders_system_user_tool_call_and_result(tokenizer: Any) -> None:
    text = tokenizer.apply_chat_template(
        conversation(json.dumps({"expression": "23 + 58"})),
        tokenize=False,
        add_generation_prompt=True,
    )
    assert text.startswith("<|system|>Answer with the number.<|end|><|user|>What is 23+58?")
    assert '"name": "calculator"' in text and '"expression": "23 + 58"' in text
    assert "<|tool|>calculator: 23 + 58 = 81<|end|>" in text
    assert text.endswith("<|assistant|>")
    parsed = tokenizer.apply_chat_template(
        conversation({"expression": "23 + 58"}), tokenize=False, add_generation_prompt=True
    )
    assert parsed == text


def test_digits_are_one_token_each_and_the_end_of_turn_is_eos(tokenizer: Any) -> None:
    ids = tokenizer("12345", add_special_tokens=False)["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids) == list("12345")
    assert tokenizer.eos_token == END
    assert tokenizer.decode(tokenizer("calculator: 23 + 58 = 81")["input_ids"]) == (
        "calculator: 23 + 58 = 81"
    )
