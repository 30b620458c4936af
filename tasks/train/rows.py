"""Stage 4's rows: what :func:`tasks.train.pairs.select` makes of the buffer's
``training_examples`` rows for each method (dpo: :class:`SelectedPair`, rft: :class:`SftRow`,
grpo: :class:`PromptRow`)."""

from __future__ import annotations

from typing import TypedDict

from tasks.datasets import PreferencePair


class SelectedPair(PreferencePair):
    """A ``preference_pairs`` row as selected, with the two trace ids behind it (``_trace_ids``:
    the lineage's, not a column)."""

    _trace_ids: list[str]


class PromptCompletion(TypedDict):
    """What an RFT (SFT) trainer reads of an example: the prompt and its completion."""

    prompt: str
    completion: str


class SftRow(PromptCompletion):
    """An RFT example: a prompt group's best answer as the completion of its prompt."""

    trace_id: str
    user_key: str | None
    reward_config_hash: str | None


class PromptRow(TypedDict):
    """A GRPO prompt: one per prompt group, with what the group's verifier needs."""

    prompt: str
    question: str
    contexts: list[str]
    trace_id: str
    user_key: str | None
    workload: str | None  # GRPO's reward picks the workload's verifier
