"""The reward's components and how they combine, and the hashes a reward value depends on.

``total = sum(w_i * c_i) / sum(w_i)`` over the components present, clamped to 0..1. A missing
component (``None`` or NaN) drops out and the remaining weights are re-normalised;
:attr:`RewardBreakdown.missing` names it, and :attr:`RewardBreakdown.not_applicable` says which
of those were computed and do not apply (NaN: no reference, no contexts, a question the
verifier cannot check) rather than failed. Re-weighting never makes a trace training data by
accident: ``reward.required`` names what a trace needs (:func:`unmet_requirements`), and one
that lacks it is scored but not eligible.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from tasks.reward.judges import judge_id

if TYPE_CHECKING:
    from infra.settings import RewardSettings, Settings

REWARD_VERSION = "reward/v2"  # v2: required components, plug-in verifiers, veto
CACHE_VERSION = "cache/v1"
COMPONENTS = ("judge", "faithfulness", "context_recall", "feedback", "latency")
CACHED = ("judge", "faithfulness", "context_recall")  # the content-dependent components


class RewardValues(TypedDict):
    """The reward a row carries from stage 2 on (:data:`tasks.datasets.REWARD_COLUMNS`): the
    total and each of :data:`COMPONENTS` as ``reward_<component>`` (``None``: missing)."""

    reward: float
    reward_judge: float | None
    reward_faithfulness: float | None
    reward_context_recall: float | None
    reward_feedback: float | None
    reward_latency: float | None


class RewardColumns(RewardValues):
    """The reward part of a scores row (:data:`tasks.datasets.SCORE_SCHEMA`): the reward
    values and eligibility."""

    missing: list[str]
    not_applicable: list[str]
    eligible: bool
    ineligible_reason: str | None  # names the judge
    judge_status: str | None
    judge_id: str | None


@dataclass(frozen=True, kw_only=True)
class RewardBreakdown:
    """A total reward in 0..1 and the components it was made of (``None`` = missing)."""

    total: float
    judge: float | None = None
    faithfulness: float | None = None
    context_recall: float | None = None
    feedback: float | None = None
    latency: float | None = None
    missing: list[str] = field(default_factory=list)
    not_applicable: list[str] = field(default_factory=list)  # a subset of ``missing``
    unmet: list[str] = field(default_factory=list)  # entries of ``reward.required`` not met
    judge_status: str = ""  # ok | failed | not_applicable | skipped_for_feedback
    judge_id: str = ""  # the judge or verifier that gave (or failed to give) the verdict

    @property
    def eligible(self) -> bool:
        """Whether the trace may become training data (every required component present)."""
        return not self.unmet

    def as_row(self) -> RewardColumns:
        """The ``reward``, ``reward_<component>`` and ``missing`` columns of a scores table,
        and eligibility: ``eligible``, ``ineligible_reason`` (names the judge), ``judge_id``."""
        return RewardColumns(
            reward=self.total,
            reward_judge=self.judge,
            reward_faithfulness=self.faithfulness,
            reward_context_recall=self.context_recall,
            reward_feedback=self.feedback,
            reward_latency=self.latency,
            missing=list(self.missing),
            not_applicable=list(self.not_applicable),
            eligible=self.eligible,
            ineligible_reason=self.ineligible_reason(),
            judge_status=self.judge_status or None,
            judge_id=self.judge_id or None,
        )

    def ineligible_reason(self) -> str | None:
        """Why the trace is not eligible, in words without personal data, e.g. ``required
        judge|feedback: judge llm:judge:rubric/v1 failed, no user feedback``."""
        if not self.unmet:
            return None
        parts = []
        for entry in self.unmet:
            why = []
            for c in entry.split("|"):
                if c == "judge":
                    why.append(f"judge {self.judge_id or '?'} {self.judge_status or 'missing'}")
                elif c == "feedback":
                    why.append("no user feedback")
                else:
                    state = "not applicable" if c in self.not_applicable else "missing"
                    why.append(f"{c} {state}")
            parts.append(f"required {entry}: {', '.join(why)}")
        return "; ".join(parts)


def weights(reward: RewardSettings) -> dict[str, float]:
    """w1..w5 of the settings by component name."""
    return {
        "judge": reward.w_judge,
        "faithfulness": reward.w_faithfulness,
        "context_recall": reward.w_context_recall,
        "feedback": reward.w_feedback,
        "latency": reward.w_latency,
    }


def feedback_component(value: int | None, none_policy: str = "neutral") -> float | None:
    """Thumbs up 1.0, down 0.0, neutral 0.5; none 0.5 or missing per ``feedback_none``."""
    if value is None:
        return 0.5 if none_policy == "neutral" else None
    return {1: 1.0, 0: 0.5, -1: 0.0}[int(value)]


def latency_component(latency_s: float | None, *, ok_s: float, max_s: float) -> float | None:
    """1.0 up to ``ok_s``, falling linearly to 0.0 at ``max_s`` (the seed's penalty)."""
    if latency_s is None or math.isnan(latency_s):
        return None
    if latency_s <= ok_s:
        return 1.0
    if latency_s >= max_s:
        return 0.0
    return 1.0 - (latency_s - ok_s) / (max_s - ok_s)


def combine(components: dict[str, float | None], reward: RewardSettings) -> RewardBreakdown:
    """The weighted total over present components (weights re-normalised), clamped to 0..1.
    ``None`` and NaN both mean missing."""
    w = weights(reward)
    present = {c: clamp(v) for c, v in components.items() if v is not None and not math.isnan(v)}
    missing = [c for c in COMPONENTS if c not in present]
    not_applicable = [c for c in missing if (v := components.get(c)) is not None and math.isnan(v)]
    denom = sum(w[c] for c in present)
    total = sum(w[c] * v for c, v in present.items()) / denom if denom > 0 else 0.0
    return RewardBreakdown(
        total=clamp(total),
        missing=missing,
        not_applicable=not_applicable,
        judge=present.get("judge"),
        faithfulness=present.get("faithfulness"),
        context_recall=present.get("context_recall"),
        feedback=present.get("feedback"),
        latency=present.get("latency"),
    )


def unmet_requirements(required: list[str], *, present: set[str], user_feedback: bool) -> list[str]:
    """The entries of ``reward.required`` not met. An entry is met when any of its
    ``|``-alternatives is: ``feedback`` by feedback the user gave (a neutral 0.5 filled in for
    none does not count), any other component by a value in ``present``."""
    have = set(present) - {"feedback"} | ({"feedback"} if user_feedback else set())
    return [entry for entry in required if not have & set(entry.split("|"))]


def resolve_ragas_mode(settings: Settings) -> str:
    """``llm`` when a judge endpoint is configured, else ``non_llm``; a ``ragas_mode`` judge
    setting of ``llm``/``non_llm`` overrides (``auto`` is the default)."""
    mode = getattr(settings.judge, "ragas_mode", "auto")  # optional setting, see report
    if mode in ("llm", "non_llm"):
        return str(mode)
    return "llm" if settings.judge.base_url else "non_llm"


def reward_config_hash(
    settings: Settings, *, judge: str | None = None, ragas_mode: str | None = None
) -> str:
    """A short hash of everything a reward value depends on (weights, thresholds, judge kind
    and model, ragas mode, the required components, verifiers, how feedback is read), stored
    beside every score."""
    r = settings.reward
    config = {
        "version": REWARD_VERSION,
        "weights": weights(r),
        "feedback_none": r.feedback_none,
        "latency": [r.latency_ok_s, r.latency_max_s],
        "judge": judge or judge_id(settings),
        "ragas_mode": ragas_mode or resolve_ragas_mode(settings),
        "skip_when_feedback": settings.judge.skip_when_feedback,
        "required": list(r.required),
        "verifiers": dict(sorted(r.verifiers.items())),
        "thumbs_down_veto": r.thumbs_down_veto,
        "reference_from_llm": settings.judge.reference_from_llm,
        "feedback": settings.feedback.model_dump(mode="json"),
    }
    return sha256(json.dumps(config, sort_keys=True))[:16]


def cache_namespace(judge: str, ragas_mode: str) -> str:
    """The cache partition: what cached components depend on besides the content. Weights
    are not part of it, so re-weighting reuses every cached verdict."""
    return sha256(json.dumps([CACHE_VERSION, judge, ragas_mode]))[:16]


def content_key(
    namespace: str, *, question: str, contexts: list[str], answer: str, reference: str | None
) -> str:
    """The cache key of an answer's content-dependent components (a hash: no text is kept)."""
    payload = [namespace, question, list(contexts), answer, reference]
    return sha256(json.dumps(payload, ensure_ascii=False))


def clamp(value: float) -> float:
    """``value`` within 0..1."""
    return min(1.0, max(0.0, value))


def sha256(text: str) -> str:
    """The hex SHA-256 of ``text``."""
    return hashlib.sha256(text.encode()).hexdigest()
