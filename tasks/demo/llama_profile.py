"""The ``llama`` embedded profile: a small Llama-architecture chat model built from a config, with
a byte-level BPE tokenizer trained locally on the demo domain and a chat template for system,
user, assistant (with tool calls) and tool messages. Nothing is downloaded.

It is the real architecture family vLLM serves (``LlamaForCausalLM``, LoRA targets ``q_proj``,
``k_proj``, ``v_proj``, ``o_proj``, ...), at demo size: hidden 128 with 2 heads, so each head is
64 wide (vLLM's CPU attention kernels reject a head width of 16). Digits are split one per
token before the byte-level BPE, so numbers are tokenised the same way in every context.

Every prompt the model sees, in training, evaluation and serving, is :data:`CHAT_TEMPLATE`
rendered over OpenAI chat messages (``tokenizer.apply_chat_template``, which vLLM also applies).
"""

from __future__ import annotations

import random
from typing import Any

from infra.traces.conversation import Messages
from tasks.demo import domain

END = "<|end|>"
PAD = "<|pad|>"
ROLE_TOKENS = ["<|system|>", "<|user|>", "<|assistant|>", "<|tool|>"]
SPECIAL_TOKENS = [PAD, END, *ROLE_TOKENS]
VOCAB_SIZE = 640
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]
# the bootstrap's shape and budget (``BootstrapConfig`` fields): head width 128 / 2 = 64, what
# vLLM's CPU attention kernels accept; a step costs ~5x the demo's (longer chat prompts).
# Positions are rotary (no parameter per position), so the context is a chat model's 2048
# tokens at no cost: vLLM refuses (HTTP 400) a request whose prompt plus ``max_tokens`` does not
# fit, and a user's conversation with tool results easily passes a few hundred tokens.
# Pre-training stops at a lower dev accuracy than the demo's target, checked more often (the
# jump is steep): a weak base with headroom for the loop, as the demo's ~50 %.
BOOTSTRAP: dict[str, Any] = {
    "n_layer": 2,
    "n_embd": 128,
    "n_head": 2,
    "n_positions": 2048,
    "steps": 400,
    "batch_size": 16,
    "target_accuracy": 0.4,
    "min_steps": 60,
    "eval_every": 20,
    "dev_items": 100,
}

# Tool-call arguments are rendered as JSON whether they come as the OpenAI string (what a trace
# holds) or as a mapping (vLLM parses the string before rendering): the same text either way.
CHAT_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'system' -%}<|system|>{{ m['content'] }}<|end|>\n"
    "{%- elif m['role'] == 'user' -%}<|user|>{{ m['content'] }}<|end|>\n"
    "{%- elif m['role'] == 'assistant' -%}<|assistant|>"
    "{%- if m['content'] -%}{{ m['content'] }}{%- endif -%}"
    "{%- for tc in (m['tool_calls'] or []) -%}"
    "{%- set fn = tc['function'] if tc['function'] is defined else tc -%}"
    '<tool_call>{"name": "{{ fn["name"] }}", "arguments": '
    "{%- if fn['arguments'] is string -%}{{ fn['arguments'] }}"
    "{%- else -%}{{ fn['arguments'] | tojson }}{%- endif -%}}</tool_call>"
    "{%- endfor -%}<|end|>\n"
    "{%- elif m['role'] == 'tool' -%}<|tool|>{{ m['content'] }}<|end|>\n"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"
)


def agent_messages(item: domain.DomainItem, *, with_tool: bool) -> Messages:
    """The messages the demo agent sends for ``item``: the question, and when ``with_tool``
    the calculator call and its result (as the simulator and the gateway see them)."""
    if with_tool:
        from tasks.demo.workloads import agent_call

        return agent_call(item)
    return [{"role": "user", "content": item.question}]


def training_prompt(item: domain.DomainItem, tokenizer: Any) -> str:
    """The pre-training prompt of ``item``: the question, the calculator call and its result,
    as the agent sends them (and as the gate asks the golden items)."""
    messages = agent_messages(item, with_tool=True)
    return str(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))


def _corpus(n: int, seed: int) -> list[str]:
    """Rendered conversations of the demo domain for training the tokenizer (no golden pair)."""
    from jinja2 import Environment

    template = Environment().from_string(CHAT_TEMPLATE)  # noqa: S701 - renders plain text
    rng = random.Random(seed)
    texts = []
    for i in range(n):
        item = domain.sample_question(rng)
        messages = agent_messages(item, with_tool=i % 2 == 0)
        if i % 5 == 0:
            messages.insert(0, {"role": "system", "content": "You are a careful calculator."})
        messages.append({"role": "assistant", "content": item.reference})
        texts.append(template.render(messages=messages, add_generation_prompt=False))
    return texts


def build_tokenizer(max_length: int, *, seed: int = 0) -> Any:
    """A byte-level BPE ``PreTrainedTokenizerFast`` trained on rendered demo conversations,
    with :data:`CHAT_TEMPLATE` and ``<|end|>`` as end of turn (EOS)."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(BPE())
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(_corpus(4000, seed), trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD,
        eos_token=END,
        bos_token=END,
        model_max_length=max_length,
        padding_side="left",
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def fresh(config: Any, *, seed: int) -> tuple[Any, Any]:
    """(tokenizer, untrained model) for a ``BootstrapConfig``."""
    tok = build_tokenizer(config.n_positions, seed=seed)
    shape = {"n_layer": config.n_layer, "n_embd": config.n_embd, "n_head": config.n_head}
    return tok, build_model(**shape, n_positions=config.n_positions, tokenizer=tok)


def build_model(*, n_layer: int, n_embd: int, n_head: int, n_positions: int, tokenizer: Any) -> Any:
    """A ``LlamaForCausalLM`` from a config (head width ``n_embd / n_head``; 64 for vLLM CPU)."""
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=n_embd,
        intermediate_size=2 * n_embd,
        num_hidden_layers=n_layer,
        num_attention_heads=n_head,
        num_key_value_heads=n_head,
        max_position_embeddings=n_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(cfg)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return model
