"""Stage 2's settings: the judge (``FLYWHEEL_JUDGE__*``), the reward (``FLYWHEEL_REWARD__*``)
and how user feedback is read (``FLYWHEEL_FEEDBACK__*``); part of
:class:`infra.settings.Settings`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, SecretStr, field_validator

COMPONENT_NAMES = ("judge", "faithfulness", "context_recall", "feedback", "latency")


class JudgeSettings(BaseModel):
    """The judge used by stage 2 (and by the gate through the same reward)."""

    kind: Literal["verifier", "llm"] = "verifier"
    base_url: str | None = None  # OpenAI-compatible endpoint for kind=llm and for ragas
    model: str = "judge"
    api_key: SecretStr | None = None
    concurrency: int = 16
    max_retries: int = 3
    timeout_s: float = 30.0
    call_budget: int = 10_000  # per run
    skip_when_feedback: bool = True  # user feedback comes first: skip the LLM judge where given
    ragas_mode: Literal["auto", "llm", "non_llm"] = "auto"  # auto: llm when base_url is set
    # ask the LLM judge to write a reference answer when a trace has none (one more call per
    # trace): context recall then applies to real traffic; off, it is "not applicable"
    reference_from_llm: bool = False


class RewardSettings(BaseModel):
    """Composite reward weights (w1..w5) and latency penalty thresholds."""

    w_judge: float = 0.30
    w_faithfulness: float = 0.25
    w_context_recall: float = 0.20
    w_feedback: float = 0.20
    w_latency: float = 0.05
    feedback_none: Literal["neutral", "missing"] = "neutral"  # none -> 0.5, or drop the component
    latency_ok_s: float = 10.0
    latency_max_s: float = 30.0
    # What a trace needs to be training-eligible: every entry must be met, an entry is one
    # component or alternatives joined by "|". "judge" is met by a judge or verifier verdict,
    # "feedback" by feedback the user gave (not by feedback_none's neutral 0.5).
    required: list[str] = ["judge|feedback"]
    # plug-in verifiers (RLVR): "module:function" or an entry point name of the group
    # "flywheel.verifiers"; `verifier` for every workload, `verifiers` per workload (wins)
    verifier: str | None = None
    verifiers: dict[str, str] = {}
    # golden sets (JSONL file or folder; tasks/golden.py): `golden` for every workload
    # (default: the repository's golden/), `golden_sets` per workload (wins)
    golden: Path | None = None
    golden_sets: dict[str, Path] = {}
    # decontamination beyond equal questions: "module:function" (question -> bool) telling that
    # a question asks a golden item in other words (default: the demo's calculator operands)
    golden_match: str | None = None
    # the questions of `flywheel prove`'s shared traffic: "module:function" taking a
    # random.Random and returning a question (default: the demo's calculator questions)
    questions: str | None = None
    thumbs_down_veto: bool = True  # a thumbs-down sets the total to 0 whatever else scored

    @field_validator("required")
    @classmethod
    def _known_components(cls, value: list[str]) -> list[str]:
        known = COMPONENT_NAMES
        for entry in value:
            bad = [c for c in entry.split("|") if c.strip() not in known]
            if bad:
                raise ValueError(f"unknown reward component {bad[0]!r}; expected one of {known}")
        return ["|".join(c.strip() for c in entry.split("|")) for entry in value]

    @field_validator("verifier", "golden_match", "questions")
    @classmethod
    def _verifier_spec(cls, value: str | None) -> str | None:
        return None if value is None else check_verifier_spec(value)

    @field_validator("verifiers")
    @classmethod
    def _verifier_specs(cls, value: dict[str, str]) -> dict[str, str]:
        return {w: check_verifier_spec(v) for w, v in value.items()}


def check_verifier_spec(spec: str) -> str:
    """``module.path:function`` or an entry point name (letters, digits, ``._-``)."""
    spec = spec.strip()
    if not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*|[A-Za-z0-9][\w.-]*", spec):
        raise ValueError("expected module.path:function or an entry point name")
    return spec


class FeedbackSettings(BaseModel):
    """How user feedback read from a trace source becomes +1 / 0 / -1."""

    score_names: list[str] = ["user_feedback"]  # Langfuse score names that carry feedback
    # categorical values (case-insensitive); any other category is ignored
    categories: dict[str, Literal[-1, 0, 1]] = {
        "positive": 1,
        "thumbs_up": 1,
        "up": 1,
        "good": 1,
        "neutral": 0,
        "negative": -1,
        "thumbs_down": -1,
        "down": -1,
        "bad": -1,
    }
    # numeric values: >= up_at is +1, <= down_at is -1, between is neutral (0.2 is neutral)
    up_at: float = 0.5
    down_at: float = -0.5
