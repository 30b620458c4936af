"""The conversation a trace keeps (issue 15): derived views, old records, OTel GenAI attributes,
structured answers, retriever spans, the demo agent's follow-ups, pairs over conversations and
the rolling buffer in days."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from infra.traces import parse_trace
from infra.traces.conversation import conversation_key
from infra.traces.mapping import pick_generation, record_fields
from tasks.demo import domain
from tasks.demo.agent import conversations, request_messages
from tasks.demo.simulate import build_population, plan_requests
from tasks.train.buffer import in_buffer
from tasks.train.pairs import GoldenFilter, select

T0 = "2026-03-01T10:00:00Z"
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "calculator", "arguments": '{"a": 2, "b": 3}'},
}
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You add numbers."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello! What shall I add?"},
    {"role": "user", "content": "What is 2 + 3?"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "2 + 3 = 5"},
]


def record(**fields: Any) -> Any:
    base = {
        "trace_id": "t",
        "prompt_group": "g",
        "answer": "5",
        "model_version": "v0",
        "latency_s": 0.1,
        "created_at": T0,
    }
    return parse_trace(json.dumps({**base, **fields}).encode(), max_bytes=100_000)


def test_question_and_contexts_are_views_of_the_messages() -> None:
    r = record(messages=MESSAGES)
    assert r.messages == MESSAGES and r.workload == "default"
    assert r.question == "What is 2 + 3?"
    assert r.contexts == ["You add numbers.", "2 + 3 = 5"]
    stored = record(messages=json.dumps(MESSAGES), workload="billing")  # as rollouts keep it
    assert stored.messages == MESSAGES and stored.workload == "billing"


def test_an_old_record_still_parses_and_gets_its_conversation() -> None:
    old = record(question="What is 2+3?", contexts=["2+3=5"])
    assert old.messages == [
        {"role": "tool", "tool_call_id": "context_0", "content": "2+3=5"},
        {"role": "user", "content": "What is 2+3?"},
    ]
    assert (old.question, old.contexts, old.finish_reason) == ("What is 2+3?", ["2+3=5"], None)
    with pytest.raises(ValueError, match="messages: list_type"):
        record(messages="not json")


def test_dedup_key_ignores_tool_call_ids_case_and_spacing_not_the_answer() -> None:
    renumbered = json.loads(json.dumps(MESSAGES).replace("call_1", "call_99"))
    shouted = [{**m, "content": m["content"].upper()} if m["content"] else m for m in MESSAGES]
    key = conversation_key(MESSAGES, "5")
    assert conversation_key(renumbered, "5") == key == conversation_key(shouted, " 5 ")
    assert conversation_key(MESSAGES, "6") != key
    assert conversation_key(MESSAGES[1:], "5") != key


def gen(**kw: Any) -> dict[str, Any]:
    return {"id": "g", "type": "GENERATION", "startTime": T0, "latency": 0.5, "model": "v0", **kw}


@pytest.mark.parametrize(
    ("output", "answer"),
    [
        ({"result": 5}, '{"result": 5}'),
        ([1, 2, 3], "[1, 2, 3]"),
        ('{"result": 5}', '{"result": 5}'),
        ({"role": "assistant", "content": None, "tool_calls": [CALL]}, ""),
        ({"choices": [{"message": {"content": "5"}, "finish_reason": "length"}]}, "5"),
    ],
)
def test_structured_and_tool_call_answers_are_kept(output: Any, answer: str) -> None:
    g = gen(input=MESSAGES, output=output)
    fields = record_fields(trace_id="t", gen=g, group=[g])
    assert parse_trace(json.dumps(fields).encode(), max_bytes=100_000).answer == answer


def test_otel_gen_ai_attributes_are_understood() -> None:
    attrs = {
        "gen_ai.request.model": "llama-3-8b",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "You add numbers.",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": "What is 2 + 3?",
        "gen_ai.prompt.2.role": "assistant",
        "gen_ai.prompt.2.tool_calls.0.id": "call_1",
        "gen_ai.prompt.2.tool_calls.0.name": "calculator",
        "gen_ai.prompt.2.tool_calls.0.arguments": '{"a": 2, "b": 3}',
        "gen_ai.prompt.3.role": "tool",
        "gen_ai.prompt.3.tool_call_id": "call_1",
        "gen_ai.prompt.3.content": "5",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "The answer is 5.",
        "gen_ai.usage.prompt_tokens": 30,
        "gen_ai.usage.completion_tokens": 5,
    }
    span = {
        "id": "s",
        "type": "SPAN",
        "startTime": T0,
        "endTime": "2026-03-01T10:00:02Z",
        "metadata": {"attributes": attrs},
    }
    assert pick_generation([span]) is span  # an OTel LLM span kept as a SPAN still counts
    fields = record_fields(trace_id="t", gen=span, group=[span])
    r = parse_trace(json.dumps(fields).encode(), max_bytes=100_000)
    assert [m["role"] for m in r.messages] == ["system", "user", "assistant", "tool"]
    assert r.messages[2]["tool_calls"][0]["function"]["name"] == "calculator"
    assert (r.question, r.answer, r.model_version) == (
        "What is 2 + 3?",
        "The answer is 5.",
        "llama-3-8b",
    )
    assert (r.tokens_in, r.tokens_out, r.contexts) == (30, 5, ["You add numbers.", "5"])


def test_retriever_spans_become_contexts() -> None:
    g = gen(input=[{"role": "user", "content": "Who wrote Hamlet?"}], output="Shakespeare")
    retriever = {
        "id": "r",
        "type": "RETRIEVER",
        "startTime": T0,
        "output": json.dumps({"documents": [{"page_content": "Hamlet is by Shakespeare."}]}),
    }
    fields = record_fields(trace_id="t", gen=g, group=[g, retriever])
    assert fields["contexts"] == ["Hamlet is by Shakespeare."]


def test_the_demo_agent_asks_follow_ups_in_the_same_conversation() -> None:
    users = build_population(20, seed=1)
    plan = plan_requests(users, requests=200, seed=4)
    follow = [r for r in plan if r.follows is not None]
    assert 0.1 * len(plan) < len(follow) < 0.4 * len(plan)
    for r in follow:
        earlier = plan[r.follows or 0]
        assert (earlier.user, earlier.session_id) == (r.user, r.session_id)
    chains = conversations(plan)
    assert sum(len(c) for c in chains) == len(plan) and any(len(c) > 1 for c in chains)
    first, second = next(c for c in chains if len(c) > 1)[:2]
    history = [*request_messages(first), {"role": "assistant", "content": "42"}]
    messages = request_messages(second, history)
    assert [m["role"] for m in messages] == [
        *("user", "assistant", "tool", "assistant"),
        *("user", "assistant", "tool"),
    ]
    assert messages[4]["content"] == second.text
    assert messages[-1]["content"] == second.item.contexts[0]


def example(trace: str, answer: str, reward: float, messages: list[dict[str, Any]]) -> dict:
    a, b = next(p for p in domain.training_pairs())
    return {
        "trace_id": trace,
        "prompt_group": "g",
        "workload": "default",
        "user_key": None,
        "question": f"What is {a}+{b}?",
        "contexts": [],
        "messages": json.dumps(messages),
        "answer": answer,
        "reward": reward,
        "reward_config_hash": "rc",
        "eligible_as": "train" if reward >= 0.7 else "rejected_only",
        "window": "2026-03-01T10:00:00Z",
        "created_at": datetime(2026, 3, 1, 10, tzinfo=UTC),
    }


def test_a_pair_prompt_is_the_rendered_conversation_and_only_the_final_turn_is_trained() -> None:
    a, b = next(p for p in domain.training_pairs())
    convo = [*MESSAGES[:3], {"role": "user", "content": f"What is {a}+{b}?"}]
    seen: list[list[dict[str, Any]]] = []

    def render(messages: list[dict[str, Any]]) -> str:
        seen.append(messages)
        return "".join(f"<{m['role']}>{m.get('content') or ''}" for m in messages) + "<assistant>"

    rows = [example("t1", str(a + b), 0.9, convo), example("t2", "0", 0.1, convo)]
    sel = select(rows, min_margin=0.2, contaminated=GoldenFilter([]), render=render)
    assert seen[0] == convo
    [pair] = sel.pairs
    assert pair["prompt"].startswith("<system>You add numbers.<user>Hi<assistant>Hello!")
    assert pair["chosen"] == f" {a + b}" and pair["rejected"] == " 0"  # the completion only
    other = [*convo[:1], {"role": "user", "content": f"What is {a}+{b}?"}]
    rows.append(example("t3", "1", 0.1, other))  # another conversation: not a sibling
    assert (
        len(select(rows, min_margin=0.2, contaminated=GoldenFilter([]), render=render).prompts) == 2
    )


def test_the_buffer_is_days_per_workload() -> None:
    now = datetime(2026, 3, 10, tzinfo=UTC)
    rows = [
        {"trace_id": f"{w}-{d}", "workload": w, "created_at": now - timedelta(days=d)}
        for w in ("default", "fast")
        for d in (1, 6, 8)
    ]
    kept = in_buffer(rows, buffer_days=7, workload_days={"fast": 2}, now=now)
    assert sorted(r["trace_id"] for r in kept) == ["default-1", "default-6", "fast-1"]
    assert len(in_buffer(rows, buffer_days=0, now=now)) == 6


def test_a_chat_template_pair_has_the_answer_right_after_the_assistant_header() -> None:
    """The chat template's renderer ends in ``<|assistant|>`` and the model was pre-trained
    with the answer right after it: no space is put between them."""
    from tasks.train.pairs import ChatRender

    class Template:
        def apply_chat_template(self, messages: list[dict[str, Any]], **_: Any) -> str:
            return "".join(f"<|{m['role']}|>{m.get('content') or ''}" for m in messages) + (
                "<|assistant|>"
            )

    a, b = next(p for p in domain.training_pairs())
    convo = [{"role": "user", "content": f"What is {a}+{b}?"}]
    rows = [example("t1", str(a + b), 0.9, convo), example("t2", "0", 0.1, convo)]
    sel = select(rows, min_margin=0.2, contaminated=GoldenFilter([]), render=ChatRender(Template()))
    [pair] = sel.pairs
    assert pair["prompt"].endswith("<|assistant|>")
    assert (pair["chosen"], pair["rejected"]) == (str(a + b), "0")
    assert [s["completion"] for s in sel.sft] == [str(a + b)]
