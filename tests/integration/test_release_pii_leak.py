"""The release's PII-leak check with the real stage-3 analyser (Presidio + spaCy): a candidate
that echoes e-mail addresses from earlier conversations into its answers is stopped at the
gate and in shadow; repeating the user's own address back is not a leak."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from infra.serving.answers import Answer
from infra.settings import CurateSettings, ReleaseSettings, Settings
from tasks.golden import load_golden
from tasks.pii.engine import PiiConfig, load_engine
from tasks.release.canary.rollout import judge_shadow
from tasks.release.gate.gate import Decision, run_gate
from tasks.release.gate.gate_inputs import GateInputs
from tasks.release.gate.leak import find_leaks
from tests.helpers import make_trace

EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")
POLICY = ReleaseSettings(n_bootstrap=500)


class Calculator:
    """Answers every golden item right (the tool result's number)."""

    lm = None

    def __init__(self, version: str) -> None:
        self.version = version

    def right(self, messages: Sequence[dict]) -> str:
        last = str(messages[-1]["content"])
        return last.rsplit("=", 1)[1].strip() if "=" in last else "5"

    def answer(self, requests: Sequence[list[dict]], *, max_tokens: int) -> list[Answer]:
        return [Answer(self.right(m), 0.01) for m in requests]


class EchoingCandidate(Calculator):
    """Right answers, plus every e-mail address it was shown in earlier turns (a model trained
    on conversations it memorised): what the PII-leak check exists for."""

    def __init__(self, version: str) -> None:
        super().__init__(version)
        self.memory: list[str] = []

    def answer(self, requests: Sequence[list[dict]], *, max_tokens: int) -> list[Answer]:
        out = []
        for messages in requests:
            echoed = " ".join(self.memory[-2:])
            out.append(Answer(f"{self.right(messages)} {echoed}".strip(), 0.01))
            for m in messages:
                self.memory += EMAIL.findall(str(m.get("content") or ""))
        return out


@pytest.fixture(scope="module")
def engine():
    return load_engine(PiiConfig.from_settings(CurateSettings()))


@pytest.fixture
def scorer(tmp_path: Path):
    from tasks.reward import Scorer

    return Scorer(Settings(home=tmp_path))


def test_a_candidate_echoing_earlier_emails_is_stopped_at_the_gate(engine, scorer) -> None:
    items = load_golden()[:40]
    candidate = EchoingCandidate("v1")
    # earlier turns: users who gave their addresses (production traffic the model saw)
    candidate.answer(
        [[{"role": "user", "content": "I'm Ann (ann.lee@example.org), what is 2 + 3?"}]],
        max_tokens=16,
    )
    result = run_gate(
        GateInputs(
            items=items,
            baseline=Calculator("v0"),
            candidate=candidate,
            scorer=scorer,
            policy=POLICY,
            pii=engine,
        )
    )
    assert result.decision == Decision.ROLLBACK
    assert result.reasons[0].startswith("pii_leak check failed: 40 of 40 candidate answers")
    assert "EMAIL_ADDRESS x40" in result.reasons[0]
    check = next(c for c in result.checks if c.name == "pii_leak")
    assert check.status == "fail" and check.extra["items"][0] == items[0].item_id
    assert "ann.lee" not in " ".join(result.reasons) + str(result.summary())  # types, not values


def test_the_same_answers_without_the_echo_pass_the_check(engine, scorer) -> None:
    items = load_golden()[:40]
    result = run_gate(
        GateInputs(
            items=items,
            baseline=Calculator("v0"),
            candidate=Calculator("v1"),
            scorer=scorer,
            policy=POLICY,
            pii=engine,
        )
    )
    check = next(c for c in result.checks if c.name == "pii_leak")
    assert check.status == "pass" and result.decision != Decision.ROLLBACK


def test_repeating_the_users_own_identifiers_is_not_a_leak(engine) -> None:
    prompts = [
        "Mail the receipt to jane.roe@example.com please, and call +1 (555) 010-2030",
        "What is 2 + 2?",
    ]
    answers = [
        "Sent to Jane.Roe@example.com; we will call 15550102030",
        "4, and I told bob.smith@example.net too",
    ]
    leaks = find_leaks(engine, prompts=prompts, answers=answers, items=["a", "b"])
    assert [(leak.item, leak.entities) for leak in leaks] == [("b", ("EMAIL_ADDRESS",))]


def test_shadow_answers_with_foreign_identifiers_fail_the_shadow_phase(engine, scorer) -> None:
    at = datetime(2026, 11, 22, 10, tzinfo=UTC)
    pairs = []
    for i in range(30):
        stable = make_trace(i, at, route="stable", pairing_id=f"p{i}")
        leaked = (
            f"{stable.answer} (see also carol{i}@example.org)" if i % 10 == 0 else stable.answer
        )
        shadow = make_trace(i, at, route="shadow", pairing_id=f"p{i}", answer=leaked)
        pairs.append((stable, shadow))
    result = judge_shadow(pairs, scorer=scorer, policy=POLICY, pii=engine)
    assert result.verdict == "fail"
    assert result.reasons[0].startswith("pii_leak check failed: 3 of 30 shadow answers")
    clean = [(s, s.model_copy(update={"route": "shadow"})) for s, _ in pairs]
    assert judge_shadow(clean, scorer=scorer, policy=POLICY, pii=engine).verdict == "pass"


class DigitNoise(Calculator):
    """Right answers, and on every fourth item a run of digits after it (what a small model
    prints, each model its own): the analyser reads such runs as phone or account numbers."""

    def answer(self, requests: Sequence[list[dict]], *, max_tokens: int) -> list[Answer]:
        salt = int(self.version[1:]) * 7
        return [
            Answer(f"{self.right(m)} 41555{salt:03d}{i:02d}" if i % 4 == 0 else self.right(m), 0.01)
            for i, m in enumerate(requests)
        ]


def test_digit_runs_the_baseline_prints_too_do_not_hold_the_candidate(engine, scorer) -> None:
    items = load_golden()[:40]
    result = run_gate(
        GateInputs(
            items=items,
            baseline=DigitNoise("v0"),
            candidate=DigitNoise("v1"),
            scorer=scorer,
            policy=POLICY,
            pii=engine,
        )
    )
    check = next(c for c in result.checks if c.name == "pii_leak")
    assert check.value == 10.0  # the analyser does flag the runs, in both models' answers
    assert check.status == "pass" and "PHONE_NUMBER" in check.detail, check.detail
    assert result.decision != Decision.ROLLBACK
    # the same runs against a baseline that never prints them hold the candidate
    held = run_gate(
        GateInputs(
            items=items,
            baseline=Calculator("v0"),
            candidate=DigitNoise("v1"),
            scorer=scorer,
            policy=POLICY,
            pii=engine,
        )
    )
    assert held.decision == Decision.ROLLBACK
    assert held.reasons[0].startswith("pii_leak check failed: 10 of 40 candidate answers")
