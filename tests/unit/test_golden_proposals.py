"""A golden set that follows traffic (tasks/golden_proposals.py, tasks/golden_review.py):
proposals from curated rows in uncovered clusters, refused near training data, a person's
accept / edit / reject, and the new golden version the gate then decides on and names."""

from __future__ import annotations

import io
import json
import shutil
from contextlib import redirect_stdout
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from infra.errors import ReviewFileError
from tasks import golden_proposals, golden_review
from tasks.golden import (
    GOLDEN_DIR,
    golden_version,
    load_golden,
    settings_golden_set,
    verify_manifest,
)

GOLDEN = load_golden(GOLDEN_DIR)
AT = datetime(2026, 11, 30, 10, 20, tzinfo=UTC)


def example(
    tid: str, question: str, answer: str, *, reward: float, judge: float | None
) -> dict[str, Any]:
    """A ``training_examples`` row as curate writes it: anonymised, with the conversation."""
    expr = question.rsplit("is ", 1)[-1].rstrip("?")
    messages = [
        {"role": "system", "content": "You are a calculator assistant."},
        {"role": "user", "content": question},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c0",
                    "type": "function",
                    "function": {
                        "name": "calculator",
                        "arguments": json.dumps({"expression": expr}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c0", "content": f"calculator: {expr} = {answer}"},
    ]
    return {
        "trace_id": tid,
        "prompt_group": f"g-{question}",
        "user_key": "k" * 64,
        "question": question,
        "contexts": [f"calculator: {expr} = {answer}"],
        "answer": answer,
        "reward": reward,
        "reward_judge": judge,
        "model_version": "v1",
        "pattern": question,
        "pii_entities": ["PERSON"] if "<PERSON>" in question else [],
        "eligible_as": "train",
        "window": "2026-11-30T10:00:00Z",
        "created_at": AT,
        "workload": "calculator",
        "messages": json.dumps(messages),
    }


ROWS = [
    example("a1", "What is 23+58?", "81", reward=0.9, judge=1.0),  # covered: never proposed
    example("a2", "Hi, I'm <PERSON>. What is 41 + 17?", "58", reward=0.9, judge=1.0),
    example("e1", "What is 3 to the power of 4?", "12", reward=0.6, judge=0.0),
    example("e2", "What is 3 to the power of 4?", "81", reward=0.8, judge=1.0),  # the reference
    example("e3", "<PERSON> here. What is 3 to the power of 4?", "81", reward=0.95, judge=1.0),
    example("e4", "What is 2 to the power of 5?", "32", reward=0.7, judge=None),  # no verdict
    example("e5", "What is 6 to the power of 2?", "36", reward=0.9, judge=1.0),  # trained on
]


def test_candidates_come_from_uncovered_clusters_with_the_verified_answer() -> None:
    found = golden_proposals.candidates(
        ROWS,
        GOLDEN,
        workload="calculator",
        golden_version="gOLD",
        threshold=0.6,
        trained=golden_proposals.NearFilter(["Can you tell me: what is 6 to the power of 2?"]),
    )
    by_q = {p.question: p for p in found.proposals}
    assert set(by_q) == {"What is 3 to the power of 4?", "What is 2 to the power of 5?"}
    three = by_q["What is 3 to the power of 4?"]
    # the highest reward the verifier passed; the wrong "12" is never the reference
    assert three.reference == "81" and three.source_trace == "e3"
    assert three.question_trace == "e1"  # the shortest phrasing's trace (forget-user reaches it)
    assert "asked 3 time(s)" in three.reason and "the verifier passed" in three.reason
    assert "uncovered cluster 1" in three.reason and "power" in three.reason
    assert "best-scored answer" in by_q["What is 2 to the power of 5?"].reason
    assert found.refused == {"near training data": 1}  # 6^2: a model trained on it
    assert json.loads(three.messages or "[]")[1]["content"] == "What is 3 to the power of 4?"


@pytest.fixture
def golden_home(settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The shared golden set copied where the test may add versions, and curated rows."""
    from infra.catalog import append_rows, open_catalog
    from infra.settings import get_settings

    root = tmp_path / "golden"
    shutil.copytree(GOLDEN_DIR, root)
    monkeypatch.setenv("FLYWHEEL_REWARD__GOLDEN", str(root))
    get_settings.cache_clear()
    settings = get_settings()
    append_rows(open_catalog(settings), "training_examples", ROWS)
    # e5 is in a model version's lineage
    monkeypatch.setattr(golden_proposals, "trained_trace_ids", lambda store: {"e5"})
    return root


def cli(*args: str) -> dict[str, Any]:
    from deployments.cli import main

    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["--json", "golden", *args]) == 0
    return json.loads(out.getvalue())


def test_propose_review_and_a_new_version_the_gate_reads(golden_home: Path, tmp_path: Path) -> None:
    from infra.settings import get_settings

    before = golden_version(golden_home)
    file = tmp_path / "proposals.jsonl"
    proposed = cli("propose", str(file), "--workload", "calculator")
    assert proposed["proposed"] == 2 and proposed["refused"] == {"near training data": 1}
    assert proposed["golden_version"] == before
    lines = [json.loads(line) for line in file.read_text().splitlines()]
    assert {line["decision"] for line in lines} == {""}
    assert "<PERSON>" not in file.read_text()  # the shortest phrasing, as curate wrote it
    for line in lines:
        if "3 to the power" in line["question"]:
            line["decision"] = "accept"
        else:
            line.update(decision="edit", question="What is 2 to the power of 6?", reference="64")
    file.write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = cli("review", str(file), "--reviewer", "rev-7")
    assert (done["accepted"], done["edited"], done["rejected"]) == (1, 1, 0)
    folder = golden_home / "calculator"
    assert done["path"] == str(folder) and done["items"] == len(GOLDEN) + 2
    assert done["golden_version"] == golden_version(folder) != before
    verify_manifest(folder)  # the new version is pinned like the original
    history = (folder / "HISTORY").read_text().splitlines()
    assert len(history) == 2 and history[0].split()[1] == before
    assert history[1].split()[1] == done["golden_version"]
    settings = get_settings()
    items, version = settings_golden_set(
        settings.reward, "calculator", workloads=settings.workloads
    )
    assert version == done["golden_version"] and len(items) == len(GOLDEN) + 2
    edited = next(it for it in items if it.question == "What is 2 to the power of 6?")
    assert edited.reference == "64" and edited.slice == "proposed"
    assert edited.prompt()[1]["content"] == "What is 2 to the power of 6?"
    clock, _ = settings_golden_set(settings.reward, "clock", workloads=settings.workloads)
    assert len(clock) == 400  # another workload's set is untouched
    with pytest.raises(ReviewFileError, match="was already (accepted|edited)"):
        golden_review.review(_runtime(), file.read_text())
    again = cli("propose", str(file), "--workload", "calculator")
    assert again["golden_version"] == done["golden_version"] and again["proposed"] == 0


def _runtime():
    from infra.runtime import Runtime

    return Runtime.from_env()


def test_a_bad_decision_is_refused_with_its_line() -> None:
    with pytest.raises(ReviewFileError, match="line 2: decision 'maybe'"):
        golden_review.parse_decisions(
            '{"proposal_id": "p1", "decision": "accept"}\n{"proposal_id": "p2", "decision": "maybe"}\n'
        )


def test_forget_user_removes_the_proposals_of_their_traces(golden_home: Path) -> None:
    from tasks.governance.erasure import delete_user_rows

    rt = _runtime()
    golden_proposals.propose(rt, "calculator")
    assert len(golden_proposals.pending(rt.catalog, "calculator")) == 2
    deleted = delete_user_rows(rt.catalog, "f" * 64, {"e1"})  # asked the shortest phrasing
    assert deleted["golden_proposals"] == 1
    (left,) = golden_proposals.pending(rt.catalog, "calculator")
    assert left["question"] == "What is 2 to the power of 5?"
