"""Monitors that catch reward hacking and mode collapse (the design's "statistical monitoring"),
as gauges the stage pushes to Prometheus; the alert rules in ``infra/prometheus/rules.yml``
read them and the Grafana dashboard shows them.

Per scored window (stage 2):

- ``flywheel_judge_feedback_agreement`` (+ ``_pairs``): share of traces with both a judge
  verdict and a non-neutral user feedback where they agree (judge >= 0.5 <=> thumbs up). A
  judge that users contradict is being gamed or is wrong.
- ``flywheel_reward_length_spearman`` (+ ``_samples``): Spearman correlation of reward and answer
  length in characters; a reward that grows with length invites padding.
- ``flywheel_answer_distinct_ratio`` (+ ``_answers``): distinct answers / answers (case and
  spaces folded); a collapsing policy repeats itself.

Per training run (stage 4): ``flywheel_train_entropy{method}``, the trainer's last logged token
entropy. Per candidate (stage 5): ``flywheel_candidate_kl{model}``, the gate's KL(candidate ||
baseline) in nats per answer token.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from infra.metrics.stage import StageReport


def judge_feedback_agreement(
    judge: Sequence[float | None], feedback: Sequence[float | None]
) -> tuple[float | None, int]:
    """(agreement share, pairs) over traces with a judge verdict and non-neutral feedback
    (feedback on the reward's scale: 1 up, 0.5 neutral, 0 down)."""
    pairs = [
        (j, f)
        for j, f in zip(judge, feedback, strict=True)
        if j is not None and f is not None and not math.isclose(f, 0.5)
    ]
    if not pairs:
        return None, 0
    agree = sum((j >= 0.5) == (f > 0.5) for j, f in pairs)
    return agree / len(pairs), len(pairs)


def reward_length_spearman(
    rewards: Sequence[float | None], answers: Sequence[str | None]
) -> tuple[float | None, int]:
    """(Spearman of reward and answer length, samples); None when either side is constant."""
    from scipy.stats import spearmanr

    pairs = [(r, len(a or "")) for r, a in zip(rewards, answers, strict=True) if r is not None]
    if len(pairs) < 3 or len({r for r, _ in pairs}) < 2 or len({n for _, n in pairs}) < 2:
        return None, len(pairs)
    rho = float(spearmanr([r for r, _ in pairs], [n for _, n in pairs]).statistic)
    return (rho if math.isfinite(rho) else None), len(pairs)


def distinct_ratio(answers: Sequence[str | None]) -> tuple[float | None, int]:
    """(distinct answers / answers, answers), case and whitespace folded."""
    texts = [" ".join((a or "").split()).casefold() for a in answers]
    if not texts:
        return None, 0
    return len(set(texts)) / len(texts), len(texts)


def window_monitors(rollouts: pa.Table, scores: pa.Table) -> dict[str, float]:
    """The stage-2 monitors of one window (gauge name -> value; an undefined one left out)."""
    answers = dict(
        zip(
            rollouts.column("trace_id").to_pylist(),
            rollouts.column("answer").to_pylist(),
            strict=True,
        )
    )
    rows = scores.select(["trace_id", "reward", "reward_judge", "reward_feedback"]).to_pylist()
    out: dict[str, float] = {}
    agreement, pairs = judge_feedback_agreement(
        [r["reward_judge"] for r in rows], [r["reward_feedback"] for r in rows]
    )
    rho, samples = reward_length_spearman(
        [r["reward"] for r in rows], [answers.get(r["trace_id"]) for r in rows]
    )
    ratio, n = distinct_ratio(list(answers.values()))
    for name, value in (
        ("flywheel_judge_feedback_agreement", agreement),
        ("flywheel_judge_feedback_pairs", float(pairs)),
        ("flywheel_reward_length_spearman", rho),
        ("flywheel_reward_length_samples", float(samples)),
        ("flywheel_answer_distinct_ratio", ratio),
        ("flywheel_answer_distinct_answers", float(n)),
    ):
        if value is not None:
            out[name] = value
    return out


def report_gauges(report: StageReport, gauges: dict[str, float], **labels: str) -> None:
    """Report each gauge of ``gauges`` with ``labels``."""
    for name, value in gauges.items():
        report.gauge(name, value, **labels)


def gate_gauges(checks: Sequence[Any]) -> dict[str, float]:
    """The candidate's KL from the gate's checks (empty when the KL check was skipped)."""
    kl = next((c for c in checks if getattr(c, "name", None) == "kl"), None)
    if kl is None or kl.value is None:
        return {}
    return {"flywheel_candidate_kl": float(kl.value)}
