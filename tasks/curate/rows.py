"""Curate's rows between its steps: a rollout joined with its score (:class:`Candidate`, what
the gates and dedup pass on) and a ``training_examples`` row as anonymisation hands it to
k-anonymity and the commit (:class:`CuratedExample`)."""

from __future__ import annotations

from typing import NotRequired

from tasks.datasets import Rollout, TrainingExample
from tasks.reward import RewardValues


class Candidate(Rollout, RewardValues):
    """A :class:`~tasks.datasets.Rollout` with its score row's reward columns
    (:func:`~tasks.curate.gates.join_scores`); the gates set ``eligible_as`` and dedup the
    ``_dedup_key`` (not a column: the dedup index's key) of every row they keep."""

    # reward: None or NaN in a score written without one, dropped as no_reward
    reward_config_hash: str | None
    reward_eligible: bool  # every component reward.required asks for is present
    reward_ineligible_reason: str | None
    eligible_as: NotRequired[str]  # "train" | "rejected_only"
    _dedup_key: NotRequired[str]


class CuratedExample(TrainingExample):
    """A :class:`~tasks.datasets.TrainingExample` with the entity type of each finding
    (``_pii_findings``: for the counts and the per-trace audit, not a column; held rows read
    back from the held area have none)."""

    _pii_findings: NotRequired[list[str]]
