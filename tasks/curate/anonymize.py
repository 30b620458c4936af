"""Rollout rows -> anonymised ``training_examples`` rows: every text of a chunk of rows (each
message's content, each tool call's arguments, tool results, the answer, the question and
contexts) goes through the Presidio engine in one batch, each distinct text analysed once;
each row gets its k-anonymity ``pattern`` (computed on its user turns) and the entity types
found. A row that breaks the analyzer is quarantined (by trace id and hash), never written."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any, TypedDict

from prefect import task
from prefect.cache_policies import NO_CACHE

from infra.traces.conversation import DEFAULT_WORKLOAD, Message, Messages
from tasks.curate.gates import quarantine_record, row_messages
from tasks.curate.kanon import placeholder_pattern
from tasks.curate.paraphrase import scrub_identifiers
from tasks.curate.rows import Candidate, CuratedExample
from tasks.datasets import Quarantine
from tasks.pii.engine import PiiConfig, Redaction, anonymize_texts, load_engine

_ENGINE_LOCK = threading.Lock()


def chunked(rows: list[Candidate], size: int) -> list[list[Candidate]]:
    """``rows`` in chunks of ``size`` (one empty chunk when there are none)."""
    return [rows[i : i + size] for i in range(0, len(rows), size)] or [[]]


def anonymize_rows(
    rows: list[Candidate], config: PiiConfig
) -> tuple[list[CuratedExample], list[Quarantine]]:
    """training_examples rows (question, answer and contexts anonymised, ``pattern`` and
    ``pii_entities`` set) and quarantine rows for traces the analyzer could not process."""
    engine = load_engine(config)
    with _ENGINE_LOCK:  # one chunk at a time per process: spaCy/Presidio are not thread-safe
        return _anonymize_locked(engine, rows)


def _anonymize_locked(
    engine: Any, rows: list[Candidate]
) -> tuple[list[CuratedExample], list[Quarantine]]:
    try:
        return [
            _example(r, red) for r, red in zip(rows, _redact_rows(engine, rows), strict=True)
        ], []
    except Exception:  # noqa: BLE001 - isolate the record that breaks the batch
        pass
    good: list[CuratedExample] = []
    bad: list[Quarantine] = []
    for row in rows:
        try:
            good.append(_example(row, _redact_rows(engine, [row])[0]))
        except Exception as exc:  # noqa: BLE001 - quarantined with the error type only
            bad.append(quarantine_record(row, f"anonymisation failed: {type(exc).__name__}"))
    return good, bad


def _texts_of(row: Candidate, messages: Messages) -> list[str]:
    """Every distinct text of a row that can hold personal data, in a stable order."""
    texts = [row["question"], row["answer"], *(row.get("contexts") or [])]
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [p["text"] for p in content if isinstance(p, dict) and "text" in p]
        for call in m.get("tool_calls") or []:
            args = (call.get("function") or {}).get("arguments")
            if isinstance(args, str):
                texts.append(args)
    return list(dict.fromkeys(t for t in texts if isinstance(t, str)))


class Redacted(TypedDict):
    """A row's conversation and the redaction of each of its texts."""

    messages: Messages
    red: dict[str, Redaction]


def _redact_rows(engine: Any, rows: list[Candidate]) -> list[Redacted]:
    """Per row: its messages and a text -> :class:`Redaction` map, from one batched pass."""
    per_row = []
    for row in rows:
        messages = row_messages(row)
        per_row.append((messages, _texts_of(row, messages)))
    unique = list(dict.fromkeys(t for _m, texts in per_row for t in texts))
    redacted = dict(zip(unique, anonymize_texts(engine, unique), strict=True))
    return [{"messages": m, "red": {t: redacted[t] for t in texts}} for m, texts in per_row]


def _redact_message(message: Message, red: dict[str, Redaction]) -> dict[str, Any]:
    out = dict(message)
    content = message.get("content")
    if isinstance(content, str):
        out["content"] = red[content].text
    elif isinstance(content, list):
        out["content"] = [
            {**p, "text": red[p["text"]].text} if isinstance(p, dict) and "text" in p else p
            for p in content
        ]
    if message.get("tool_calls"):
        out["tool_calls"] = [_redact_call(c, red) for c in message["tool_calls"]]
    return out


def _redact_call(call: Any, red: dict[str, Any]) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("arguments"), str):
        return call
    return {**call, "function": {**function, "arguments": red[function["arguments"]].text}}


def _scrub_user(message: dict[str, Any]) -> dict[str, Any]:
    """A user turn without order numbers and other long codes (see ``question``)."""
    if message.get("role") == "user" and isinstance(message.get("content"), str):
        return {**message, "content": scrub_identifiers(message["content"])}
    return message


def _user_pattern(messages: Messages, red: dict[str, Redaction]) -> str:
    """The k-anonymity key: the placeholder pattern of every user turn, in order."""
    turns = [m["content"] for m in messages if m.get("role") == "user"]
    return "\n".join(
        placeholder_pattern(t, red[t].spans) for t in turns if isinstance(t, str) and t in red
    )


def _example(row: Candidate, redacted: Redacted) -> CuratedExample:
    red, messages = redacted["red"], redacted["messages"]
    findings = sorted(e for r in red.values() for e in r.entities)
    clean = [_scrub_user(_redact_message(m, red)) for m in messages]
    return CuratedExample(
        reward=row["reward"],
        reward_judge=row.get("reward_judge"),
        reward_faithfulness=row.get("reward_faithfulness"),
        reward_context_recall=row.get("reward_context_recall"),
        reward_feedback=row.get("reward_feedback"),
        reward_latency=row.get("reward_latency"),
        reward_config_hash=row.get("reward_config_hash"),
        trace_id=row["trace_id"],
        prompt_group=row["prompt_group"],
        user_key=row.get("user_key"),
        workload=row.get("workload") or DEFAULT_WORKLOAD,
        messages=json.dumps(clean),
        # order numbers and other long codes never reach the table (users' words only)
        question=scrub_identifiers(red[row["question"]].text),
        contexts=[red[c].text for c in row.get("contexts") or []],
        answer=red[row["answer"]].text,
        model_version=row["model_version"],
        pattern=_user_pattern(messages, red)
        or placeholder_pattern(row["question"], red[row["question"]].spans),
        pii_entities=sorted(set(findings)),
        _pii_findings=findings,  # per-finding types for the metrics; not a table column
        eligible_as=row["eligible_as"],
        window=row["window"],
        created_at=row["created_at"],
    )


def count_entities(rows: Iterable[CuratedExample]) -> Counter[str]:
    """Entities removed, by type (one per finding)."""
    return Counter(e for r in rows for e in r.get("_pii_findings", r["pii_entities"]))


@task(cache_policy=NO_CACHE)
def anonymize_task(
    rows: list[Candidate], config: PiiConfig
) -> tuple[list[CuratedExample], list[Quarantine]]:
    """Returns anonymised training_examples rows and quarantine rows for one chunk."""
    return anonymize_rows(rows, config)
