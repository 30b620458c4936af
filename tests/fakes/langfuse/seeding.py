"""Seeding the fake Langfuse the way the gateway and an agent SDK would write to it: calculator
traces with feedback and judge scores, and agent runs (tool calls, retrieval, an OpenTelemetry
GenAI span)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from tests.fakes.langfuse.model import FakeObservation, FakeScore, FakeTrace


class Seeding:
    """The seeding half of :class:`tests.fakes.langfuse.FakeLangfuseServer`."""

    def add_trace(self, trace: FakeTrace) -> FakeTrace:  # implemented by the server
        raise NotImplementedError

    def add_score(self, score: FakeScore) -> None:  # implemented by the server
        raise NotImplementedError

    def seed(
        self,
        n: int,
        *,
        start: datetime,
        spacing: timedelta,
        feedback: tuple[int | None, ...] = (1, -1, 0, None),
        prefix: str = "t",
    ) -> list[FakeTrace]:
        """N calculator-agent traces from ``start``; every 5th is a SPAN with a GENERATION and a
        TOOL child. Feedback cycles through ``feedback`` (None: no score)."""
        out = []
        for i in range(n):
            at, tid = start + i * spacing, f"{prefix}-{i:05d}"
            a, b = 11 + i % 80, 7 + i % 13
            tool = f"calculator({a}*{b}) = {a * b}"
            gen = FakeObservation(
                id=f"{tid}-gen",
                trace_id=tid,
                start_time=at,
                end_time=at + timedelta(milliseconds=250 + i),
                model="v0",
                version="v0",
                input=[
                    {"role": "system", "content": "You are a calculator agent."},
                    {"role": "tool", "content": tool},
                    {"role": "user", "content": f"What is {a} x {b}?"},
                ],
                output={"role": "assistant", "content": str(a * b)},
                metadata={
                    "prompt_group": f"pg-{i // 3}",
                    "route": "stable",
                    "model_version": "v0",
                    "contexts": [tool],
                },
                model_parameters={"temperature": 0.7, "top_p": 0.95},
                usage={"input": 20 + i % 9, "output": 3, "total": 23 + i % 9},
            )
            obs = [gen]
            if i % 5 == 4:
                root = FakeObservation(
                    id=f"{tid}-agent",
                    trace_id=tid,
                    start_time=at,
                    type="SPAN",
                    name="agent",
                    end_time=gen.end_time,
                )
                gen.parent_id = root.id
                obs = [
                    root,
                    gen,
                    FakeObservation(
                        id=f"{tid}-tool",
                        trace_id=tid,
                        type="TOOL",
                        name="calculator",
                        start_time=at,
                        parent_id=root.id,
                        input={"a": a, "b": b},
                        output=a * b,
                        level="ERROR" if i % 10 == 9 else "DEFAULT",
                    ),
                ]
            out.append(
                self.add_trace(
                    FakeTrace(
                        id=tid,
                        timestamp=at,
                        observations=obs,
                        user_id=f"user-{i % 7}",
                        session_id=f"s-{i}",
                    )
                )
            )
            value = feedback[i % len(feedback)] if feedback else None
            if value is not None:
                self.add_score(
                    FakeScore(
                        id=f"{tid}-fb",
                        trace_id=tid,
                        value=value,
                        timestamp=at + timedelta(minutes=5),
                    )
                )
            self.add_score(
                FakeScore(
                    id=f"{tid}-judge",
                    trace_id=tid,
                    value=0.5,
                    name="judge",
                    timestamp=at + timedelta(minutes=1),
                )
            )
        return out

    def add_agent_trace(
        self,
        trace_id: str,
        *,
        at: datetime,
        messages: list[dict[str, Any]],
        answer: Any,
        user_id: str | None = None,
        session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        retrieved: list[str] | None = None,
        otel: bool = False,
    ) -> FakeTrace:
        """An agent run as Langfuse records it: a root AGENT span; under it, per tool call of
        the conversation, a GENERATION that asked for it and the TOOL observation that ran it;
        an optional RETRIEVER span (``retrieved`` documents); and the final GENERATION whose
        input is the whole conversation and whose output is ``answer``. ``otel``: the final
        generation as an OpenTelemetry GenAI span ingested by Langfuse v3 (no input/output,
        the conversation in ``gen_ai.prompt.N.*`` attributes under ``metadata.attributes``)."""
        root = FakeObservation(
            id=f"{trace_id}-agent", trace_id=trace_id, start_time=at, type="AGENT", name="agent"
        )
        obs = [root]
        step = timedelta(milliseconds=100)
        t = at
        for i, message in enumerate(messages):
            for call in message.get("tool_calls") or []:
                fn = call.get("function") or {}
                result = next(
                    (m.get("content") for m in messages[i:] if m.get("tool_call_id") == call["id"]),
                    None,
                )
                obs.append(
                    FakeObservation(
                        id=f"{trace_id}-gen-{len(obs)}",
                        trace_id=trace_id,
                        start_time=(t := t + step),
                        end_time=t + step,
                        parent_id=root.id,
                        input=messages[:i],
                        output=message,
                        model="v0",
                    )
                )
                obs.append(
                    FakeObservation(
                        id=f"{trace_id}-tool-{len(obs)}",
                        trace_id=trace_id,
                        type="TOOL",
                        name=fn.get("name"),
                        start_time=(t := t + step),
                        end_time=t + step,
                        parent_id=root.id,
                        input=fn.get("arguments"),
                        output=result,
                    )
                )
        if retrieved:
            obs.append(
                FakeObservation(
                    id=f"{trace_id}-retriever",
                    trace_id=trace_id,
                    type="RETRIEVER",
                    name="search",
                    start_time=(t := t + step),
                    end_time=t + step,
                    parent_id=root.id,
                    input={"query": "docs"},
                    output={"documents": [{"page_content": d} for d in retrieved]},
                )
            )
        final = FakeObservation(
            id=f"{trace_id}-final",
            trace_id=trace_id,
            start_time=(t := t + step),
            end_time=t + timedelta(milliseconds=400),
            parent_id=root.id,
            input=messages,
            output=answer,
            model="v0",
            version="v0",
            metadata=dict(metadata or {}),
            model_parameters={"temperature": 0.7},
            usage={"input": 40, "output": 6, "total": 46},
        )
        if otel:
            final.input, final.output = None, None
            final.metadata["attributes"] = _gen_ai_attributes(messages, answer)
        obs.append(final)
        root.end_time = final.end_time
        return self.add_trace(
            FakeTrace(
                id=trace_id, timestamp=at, observations=obs, user_id=user_id, session_id=session_id
            )
        )


def _gen_ai_attributes(messages: list[dict[str, Any]], answer: Any) -> dict[str, Any]:
    """OpenTelemetry GenAI attributes of an LLM span (flattened, as OTLP carries them)."""
    attrs: dict[str, Any] = {
        "gen_ai.system": "openai",
        "gen_ai.request.model": "v0",
        "gen_ai.usage.input_tokens": 40,
        "gen_ai.usage.output_tokens": 6,
    }
    for i, m in enumerate(messages):
        for key in ("role", "content", "tool_call_id"):
            if m.get(key) is not None:
                attrs[f"gen_ai.prompt.{i}.{key}"] = m[key]
        for j, call in enumerate(m.get("tool_calls") or []):
            fn = call.get("function") or {}
            attrs[f"gen_ai.prompt.{i}.tool_calls.{j}.id"] = call.get("id")
            attrs[f"gen_ai.prompt.{i}.tool_calls.{j}.name"] = fn.get("name")
            attrs[f"gen_ai.prompt.{i}.tool_calls.{j}.arguments"] = fn.get("arguments")
    attrs["gen_ai.completion.0.role"] = "assistant"
    attrs["gen_ai.completion.0.content"] = answer if isinstance(answer, str) else json.dumps(answer)
    return attrs
