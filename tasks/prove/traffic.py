"""The shared traffic of an ablation: the base model answers simulated questions (given by the
caller: the embedded demo's in ``flywheel prove``) once, each
sampled at the gateway's diverse temperatures (one prompt group per question), every answer
scored by the stage-2 reward (:class:`tasks.reward.Scorer`, the configured judge), eligibility
as curate sets it (reward >= ``curate.min_reward`` -> ``train``, else ``rejected_only``) and
the training data selected by stage 4's own :func:`tasks.train.pairs.select` (golden questions
excluded). Every arm trains on a view of this one :class:`Traffic`."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NotRequired, Protocol, TypedDict, cast

from tasks.train.pairs import GoldenFilter, Selection, demo_render, select

if TYPE_CHECKING:
    from collections.abc import Sequence

    from infra.serving.local_lm import LocalLM
    from infra.settings import RewardSettings, Settings
    from tasks.datasets import BufferedExample

WINDOW = "prove"


class TrafficRow(TypedDict):
    """One sampled answer with the buffer's columns stage 4 reads (:func:`score_rows` fills
    in ``reward``, its configuration hash and ``eligible_as``)."""

    trace_id: str
    prompt_group: str
    user_key: str
    question: str
    contexts: list[str]
    answer: str
    temperature: float
    window: str
    reward: NotRequired[float]
    reward_config_hash: NotRequired[str]
    eligible_as: NotRequired[str]


@dataclass(kw_only=True)
class Traffic:
    """Rows as stage 4 reads them, what it selects from them, and counts (no text)."""

    rows: list[TrafficRow]
    selection: Selection
    prompts: int
    temperatures: list[float]
    mean_reward: float
    correct_share: float  # answers the verifier accepts
    counts: dict[str, int] = field(default_factory=dict)


class Question(Protocol):
    """What the traffic needs of a simulated question."""

    @property
    def question(self) -> str:
        """The question text."""

    @property
    def contexts(self) -> list[str]:
        """The tool results or passages that come with it."""


def sample_answers(
    lm: LocalLM,
    items: Sequence[Question],
    *,
    temperatures: Sequence[float],
    seed: int,
    max_new_tokens: int = 16,
    batch_size: int = 100,
) -> list[TrafficRow]:
    """Each (non-golden) question answered once per temperature (seeded)."""
    rows: list[TrafficRow] = []
    for t_index, temperature in enumerate(temperatures):
        for start in range(0, len(items), batch_size):
            chunk = items[start : start + batch_size]
            gens = lm.generate_batch(
                [demo_render(it.question) for it in chunk],
                temperature=temperature,
                max_new_tokens=max_new_tokens,
                seed=seed * 1000 + t_index * 100 + start // batch_size,
            )
            for i, (item, gen) in enumerate(zip(chunk, gens, strict=True)):
                n = start + i
                rows.append(
                    {
                        "trace_id": f"p{n:05d}-t{t_index}",
                        "prompt_group": f"g{n:05d}",
                        "user_key": f"u{n % 97:03d}",
                        "question": item.question,
                        "contexts": list(item.contexts),
                        "answer": gen.text,
                        "temperature": temperature,
                        "window": WINDOW,
                    }
                )
    return rows


def score_rows(rows: list[TrafficRow], *, settings: Settings) -> str:
    """Fill ``reward`` (stage-2 reward, no feedback) and ``eligible_as`` in place; returns the
    reward configuration hash."""
    from tasks.reward import ScoreItem, Scorer

    scorer = Scorer(settings)
    items = [
        ScoreItem(question=r["question"], contexts=r["contexts"], answer=r["answer"], latency_s=0.0)
        for r in rows
    ]
    for row, result in zip(rows, scorer.score(items), strict=True):
        row["reward"] = result.total
        row["reward_config_hash"] = scorer.config_hash
        row["eligible_as"] = (
            "train" if result.total >= settings.curate.min_reward else "rejected_only"
        )
    return scorer.config_hash


def build_traffic(
    lm: LocalLM,
    questions: Sequence[Question],
    *,
    settings: Settings,
    temperatures: Sequence[float],
    seed: int,
) -> Traffic:
    """Sample, score and select: the one data set every arm of the ablation trains on."""
    rows = sample_answers(lm, questions, temperatures=temperatures, seed=seed)
    score_rows(rows, settings=settings)
    selection = select(
        # the buffer's columns select reads; no judge or creation time (it never reads them)
        cast("list[BufferedExample]", rows),
        min_margin=settings.train.min_margin,
        contaminated=GoldenFilter.from_settings(settings.reward),
    )
    correct = sum(score == 1.0 for score in _verified(rows, settings.reward))
    roles = Counter(r["eligible_as"] for r in rows)
    return Traffic(
        rows=rows,
        selection=selection,
        prompts=len(questions),
        temperatures=list(temperatures),
        mean_reward=sum(float(r["reward"]) for r in rows) / max(1, len(rows)),
        correct_share=correct / max(1, len(rows)),
        counts={"answers": len(rows), **{f"eligible_{k}": v for k, v in roles.items()}},
    )


def _verified(rows: list[TrafficRow], reward: RewardSettings) -> list[float | None]:
    """The verifier's score of each answer (``None`` where it cannot tell)."""
    from tasks.reward.scorer import run_sync
    from tasks.reward.verifiers import VerifierTrace, verifier_for

    verifier = verifier_for(reward)
    traces = [
        VerifierTrace(question=r["question"], contexts=list(r["contexts"]), answer=r["answer"])
        for r in rows
    ]

    async def verdicts() -> list[float | None]:
        return [(await verifier.verify(t)).score for t in traces]

    return list(run_sync(verdicts()))
