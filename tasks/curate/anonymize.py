"""Rollout rows -> anonymised ``training_examples`` rows: question, answer and contexts of a
chunk of rows go through the Presidio engine in one batch; each row gets its k-anonymity
``pattern`` and the entity types found. A row that breaks the analyzer is quarantined (by
trace id and hash), never written."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.curate.gates import REWARD_COLUMNS, quarantine_record
from tasks.curate.paraphrase import scrub_identifiers
from tasks.curate.pii import PiiConfig, anonymize_texts, load_engine, placeholder_pattern

_ENGINE_LOCK = threading.Lock()


def chunked(rows: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    """``rows`` in chunks of ``size`` (one empty chunk when there are none)."""
    return [rows[i : i + size] for i in range(0, len(rows), size)] or [[]]


def anonymize_rows(
    rows: list[dict[str, Any]], config: PiiConfig
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """training_examples rows (question, answer and contexts anonymised, ``pattern`` and
    ``pii_entities`` set) and quarantine rows for traces the analyzer could not process."""
    engine = load_engine(config)
    with _ENGINE_LOCK:  # one chunk at a time per process: spaCy/Presidio are not thread-safe
        return _anonymize_locked(engine, rows)


def _anonymize_locked(
    engine: Any, rows: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    try:
        return [
            _example(r, red) for r, red in zip(rows, _redact_rows(engine, rows), strict=True)
        ], []
    except Exception:  # noqa: BLE001 - isolate the record that breaks the batch
        pass
    good, bad = [], []
    for row in rows:
        try:
            good.append(_example(row, _redact_rows(engine, [row])[0]))
        except Exception as exc:  # noqa: BLE001 - quarantined with the error type only
            bad.append(quarantine_record(row, f"anonymisation failed: {type(exc).__name__}"))
    return good, bad


def _redact_rows(engine: Any, rows: list[dict[str, Any]]) -> list[list[Any]]:
    texts: list[str] = []
    for row in rows:
        texts += [row["question"], row["answer"], *(row.get("contexts") or [])]
    redactions = anonymize_texts(engine, texts)
    out, i = [], 0
    for row in rows:
        n = 2 + len(row.get("contexts") or [])
        out.append(redactions[i : i + n])
        i += n
    return out


def _example(row: dict[str, Any], red: list[Any]) -> dict[str, Any]:
    question, answer, contexts = red[0], red[1], red[2:]
    findings = sorted(e for r in red for e in r.entities)
    example = {c: row.get(c) for c in (*REWARD_COLUMNS, "reward_config_hash")}
    example.update(
        trace_id=row["trace_id"],
        prompt_group=row["prompt_group"],
        user_key=row.get("user_key"),
        question=scrub_identifiers(question.text),  # order numbers never reach the table
        contexts=[c.text for c in contexts],
        answer=answer.text,
        model_version=row["model_version"],
        pattern=placeholder_pattern(row["question"], question.spans),
        pii_entities=sorted(set(findings)),
        _pii_findings=findings,  # per-finding types for the metrics; not a table column
        eligible_as=row["eligible_as"],
        window=row["window"],
        created_at=row["created_at"],
    )
    return example


def count_entities(rows: Iterable[dict[str, Any]]) -> Counter[str]:
    """Entities removed, by type (one per finding)."""
    return Counter(e for r in rows for e in r.get("_pii_findings", r["pii_entities"]))


@task(cache_policy=NO_CACHE)
def anonymize_task(
    rows: list[dict[str, Any]], config: PiiConfig
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Returns anonymised training_examples rows and quarantine rows for one chunk."""
    return anonymize_rows(rows, config)
