"""How the release gate compares a candidate with its baseline, chosen once per gate: a
candidate must be **better** (:class:`Superiority`, the paired test of
:mod:`tasks.release.gate.superiority`), or a cheaper model (a distilled student) must be **no
worse** by more than a margin and, where asked, cheaper (:class:`NoWorse`,
:mod:`tasks.release.gate.noninferiority`). Each says how the two versions are asked (a
non-inferiority gate compares cost, so the versions take turns) and how the scored answers
are decided."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tasks.release.gate.noninferiority import answer_alternating, noninferior_gate
from tasks.release.gate.superiority import decide

if TYPE_CHECKING:
    from collections.abc import Sequence

    from infra.serving.answers import Answer, AnswerSource, Messages
    from infra.settings import ReleaseSettings, RewardSettings
    from tasks.release.gate.drift import Check
    from tasks.release.gate.noninferiority import NonInferiorGate
    from tasks.release.verdict import Decision, Scored


@dataclass(frozen=True)
class Verdict:
    """The gate's decision, its reasons, and a non-inferiority gate's own report."""

    decision: Decision
    reasons: list[str]
    noninferiority: NonInferiorGate | None = None


class Comparison(Protocol):
    """How a gate asks both versions and decides on their scored answers."""

    def answer(
        self,
        baseline: AnswerSource,
        candidate: AnswerSource,
        requests: list[Messages],
        *,
        max_tokens: int,
    ) -> tuple[list[Answer], list[Answer]]:
        """The baseline's and the candidate's answers to ``requests``, in item order."""
        ...

    def decide(
        self,
        scored: Scored,
        policy: ReleaseSettings,
        *,
        reward: RewardSettings,
        checks: Sequence[Check],
    ) -> Verdict:
        """The gate's verdict on the scored answers and the checks beside them."""
        ...


@dataclass(frozen=True)
class Superiority:
    """The candidate must be significantly better (the gate's default)."""

    def answer(
        self,
        baseline: AnswerSource,
        candidate: AnswerSource,
        requests: list[Messages],
        *,
        max_tokens: int,
    ) -> tuple[list[Answer], list[Answer]]:
        """The baseline's answers, then the candidate's."""
        base = baseline.answer(requests, max_tokens=max_tokens)
        return base, candidate.answer(requests, max_tokens=max_tokens)

    def decide(
        self,
        scored: Scored,
        policy: ReleaseSettings,
        *,
        reward: RewardSettings,  # noqa: ARG002 - the comparison interface's: a student's
        checks: Sequence[Check],
    ) -> Verdict:
        """The paired test's verdict (:func:`tasks.release.gate.superiority.decide`)."""
        decision, reasons = decide(scored.test, policy, slices=scored.slices, checks=checks)
        return Verdict(decision, reasons)


@dataclass(frozen=True)
class NoWorse:
    """No worse than the baseline by more than ``margin`` and, with ``cheaper``, cheaper."""

    margin: float
    cheaper: bool = True

    def answer(
        self,
        baseline: AnswerSource,
        candidate: AnswerSource,
        requests: list[Messages],
        *,
        max_tokens: int,
    ) -> tuple[list[Answer], list[Answer]]:
        """Both versions' answers in alternating turns: their cost is compared too."""
        return answer_alternating(baseline, candidate, requests, max_tokens=max_tokens)

    def decide(
        self,
        scored: Scored,
        policy: ReleaseSettings,
        *,
        reward: RewardSettings,
        checks: Sequence[Check],
    ) -> Verdict:
        """The non-inferiority test's and the cost's verdict (not "better")."""
        ni = noninferior_gate(
            scored,
            reward=reward,
            policy=policy,
            margin=self.margin,
            cheaper=self.cheaper,
            checks=checks,
        )
        return Verdict(ni.decision, ni.reasons, ni)


def comparison(margin: float | None, *, cheaper: bool = True) -> Comparison:
    """Superiority without a margin, else non-inferiority at ``margin``."""
    return Superiority() if margin is None else NoWorse(margin, cheaper)
