"""The release gate: baseline and candidate answer every golden item through the production
generation path, the stage-2 reward scores each answer, and a paired comparison decides.

Decision (the seed's rule, in this order):

0. candidate answers naming identifiers (e-mail, phone, card, ...) that are not in their prompt,
   more often than the baseline's answers to the same prompts -> ``ROLLBACK`` (the PII-leak
   check, :mod:`tasks.release.gate.leak`);
1. fewer than ``min_samples`` pairs -> ``MANUAL_REVIEW`` (no automatic verdict on little data),
   unless the regression is catastrophic: candidate mean below ``reject_ratio`` of the baseline
   and significantly worse (p < ``alpha``) even on those few pairs -> ``ROLLBACK``;
2. candidate mean below ``reject_ratio`` (95 %) of the baseline mean and significantly lower
   (paired t-test p < ``alpha``, two-sided as for "better", so an identical candidate gets an
   automatic verdict, either way, at most ``alpha`` of the time) -> ``ROLLBACK`` (rejected);
   below it without significance: step 4 (a draw of the same version on a 400-item set fell
   below 95 % one time in seven: ``make bench``, bench_release_decisions.py);
3. significantly better (``ttest_rel`` p < ``alpha`` and mean difference > 0) ->
   ``PROCEED_TO_SHADOW``, unless a golden slice regressed by more than ``slice_tolerance``
   (absolute drop of its mean reward) or a drift check failed: then ``MANUAL_REVIEW``;
4. otherwise ``MANUAL_REVIEW`` (held for a person).

Reported beside the t-test: Wilcoxon signed-rank (zero differences dropped; all zero -> p = 1),
a percentile bootstrap CI of the mean difference, and Cohen's d_z (mean / sd of differences).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from infra.serving.answers import Answer, AnswerSource, Messages
from tasks.release.gate.comparison import comparison
from tasks.release.gate.drift import Check, diversity_check, kl_check, length_bias_check
from tasks.release.gate.hacking import golden_verifier_check
from tasks.release.gate.leak import pii_leak_check
from tasks.release.stats import PairedTest, paired_test
from tasks.release.verdict import Decision, Scored, SliceResult

__all__ = [
    "Decision",
    "GateResult",
    "PairedTest",
    "SliceResult",
    "paired_test",
    "run_gate",
]

if TYPE_CHECKING:
    from collections.abc import Sequence

    from infra.settings import ReleaseSettings
    from tasks.datasets import EvalResult
    from tasks.golden import GoldenItem
    from tasks.pii.engine import PiiEngine
    from tasks.release.gate.gate_inputs import GateInputs
    from tasks.reward import Scorer

log = logging.getLogger(__name__)


def slice_results(
    slices: Sequence[str],
    *,
    baseline: Sequence[float],
    candidate: Sequence[float],
    tolerance: float,
) -> list[SliceResult]:
    """Per-slice means; a slice regressed when its mean dropped by more than ``tolerance``."""
    groups: dict[str, list[tuple[float, float]]] = {}
    for name, b, c in zip(slices, baseline, candidate, strict=True):
        groups.setdefault(name, []).append((b, c))
    out = []
    for name in sorted(groups):
        pairs = groups[name]
        mb = sum(b for b, _ in pairs) / len(pairs)
        mc = sum(c for _, c in pairs) / len(pairs)
        out.append(
            SliceResult(
                name=name,
                n=len(pairs),
                mean_baseline=mb,
                mean_candidate=mc,
                diff=mc - mb,
                regressed=mb - mc > tolerance + 1e-12,
            )
        )
    return out


# ---- answers through the production generation path ----------------------------------------


def _prompt_text(messages: Messages) -> str:
    """Everything the model was given (what an answer may repeat without leaking)."""
    return "\n".join(str(m.get("content") or "") for m in messages)


# ---- the gate -------------------------------------------------------------------------------


@dataclass(kw_only=True)
class ItemPair:
    """One golden item's answers and scores from both versions."""

    item_id: str
    slice: str
    baseline_answer: str
    candidate_answer: str
    baseline_score: float
    candidate_score: float


@dataclass(kw_only=True)
class GateResult:
    """Everything one gate run decided and why, with every item's pair."""

    version: str
    baseline: str
    run_id: str
    decision: Decision
    reasons: list[str]
    test: PairedTest
    slices: list[SliceResult]
    checks: list[Check]
    items: list[ItemPair]
    errors: dict[str, int] = field(default_factory=dict)  # generation failures per version
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    workload: str | None = None  # the workload whose release this gated (None: the shared)
    noninferiority: dict[str, Any] | None = None  # a cheaper model's test and cost
    golden_version: str | None = None  # the golden set's version (tasks.golden.golden_version)
    warnings: list[str] = field(default_factory=list)  # e.g. the golden set's coverage

    def summary(self) -> dict[str, Any]:
        """Everything but the per-item rows, JSON-ready (the report and the audit evidence)."""
        return {
            **({"workload": self.workload} if self.workload else {}),
            "version": self.version,
            "baseline": self.baseline,
            "run_id": self.run_id,
            "decision": self.decision.value,
            "reasons": self.reasons,
            "test": asdict(self.test),
            "slices": [asdict(s) for s in self.slices],
            "checks": [c.as_dict() for c in self.checks],
            "errors": self.errors,
            "created_at": self.created_at.isoformat(),
            "golden_version": self.golden_version,
            "warnings": self.warnings,
            **({"noninferiority": self.noninferiority} if self.noninferiority else {}),
        }

    def eval_rows(self) -> list[EvalResult]:
        """The ``eval_results`` rows: one per item and version, sharing ``run_id``."""
        rows: list[EvalResult] = []
        for it in self.items:
            for version, score, answer in (
                (self.baseline, it.baseline_score, it.baseline_answer),
                (self.version, it.candidate_score, it.candidate_answer),
            ):
                rows.append(
                    {
                        "run_id": self.run_id,
                        "model_version": version,
                        "item_id": it.item_id,
                        "slice": it.slice,
                        "score": score,
                        "answer": answer,
                        "created_at": self.created_at,
                    }
                )
        return rows


def score_answers(
    items: Sequence[GoldenItem], answers: Sequence[Answer], *, scorer: Scorer
) -> list[float]:
    """The stage-2 reward of each answer (golden reference, no feedback, generation latency),
    judged by its item's workload's verifier when the settings name one (``reward.verifiers``)."""
    from tasks.reward import ScoreItem

    batch = [
        ScoreItem(
            question=it.question,
            contexts=list(it.contexts),
            answer=a.text,
            reference=it.reference,
            latency_s=a.latency_s,
            workload=it.workload,
        )
        for it, a in zip(items, answers, strict=True)
    ]
    return [r.total for r in scorer.score(batch)]


def gate_checks(
    scored: Scored,
    requests: list[Messages],
    baseline: AnswerSource,
    candidate: AnswerSource,
    *,
    scorer: Scorer,
    policy: ReleaseSettings,
    pii: PiiEngine | None,
) -> list[Check]:
    """The checks beside the comparison: drift (KL, diversity, length bias), the golden
    verifier's agreement with the judge, and the PII-leak check when ``pii`` is given."""
    items, (b_scores, c_scores) = scored.items, scored.rewards
    b_text, c_text = [a.text for a in scored.base], [a.text for a in scored.cand]
    prompts = [candidate.lm.render(m) for m in requests] if candidate.lm else []
    checks = [
        kl_check(candidate.lm, baseline.lm, prompts=prompts, answers=c_text, policy=policy),
        diversity_check(c_text, b_text, references=[it.reference for it in items], policy=policy),
        length_bias_check(
            b_scores, c_scores, baseline_answers=b_text, candidate_answers=c_text, policy=policy
        ),
        golden_verifier_check(
            items,
            reward=scorer.settings.reward,
            judge_kind=scorer.judge.kind,
            baseline_answers=b_text,
            candidate_answers=c_text,
            judged=scored.test,
            judged_rewards=(b_scores, c_scores),
            alpha=policy.alpha,
        ),
    ]
    if pii is not None:
        checks.append(
            pii_leak_check(
                pii,
                prompts=[_prompt_text(m) for m in requests],
                answers=c_text,
                items=[it.item_id for it in items],
                baseline_answers=b_text,
            )
        )
    return checks


def run_gate(inputs: GateInputs, *, run_id: str | None = None) -> GateResult:
    """Answer, score, compare and decide (nothing written) on what ``inputs`` names."""
    items, baseline, candidate = inputs.items, inputs.baseline, inputs.candidate
    scorer, policy, pii = inputs.scorer, inputs.policy, inputs.pii
    compare = comparison(inputs.margin, cheaper=inputs.cheaper)  # chosen once: better or no worse
    requests = [it.prompt() for it in items]
    base, cand = compare.answer(baseline, candidate, requests, max_tokens=inputs.max_tokens)
    scores = score_answers([*items, *items], [*base, *cand], scorer=scorer)
    b_scores, c_scores = scores[: len(items)], scores[len(items) :]
    scored = Scored(
        items=items,
        base=base,
        cand=cand,
        rewards=(b_scores, c_scores),
        test=paired_test(
            b_scores,
            c_scores,
            n_bootstrap=policy.n_bootstrap,
            confidence=policy.confidence,
            seed=policy.seed,
        ),
        slices=slice_results(
            [it.slice for it in items],
            baseline=b_scores,
            candidate=c_scores,
            tolerance=policy.slice_tolerance,
        ),
    )
    checks = gate_checks(
        scored, requests, baseline, candidate, scorer=scorer, policy=policy, pii=pii
    )
    verdict = compare.decide(scored, policy, reward=scorer.settings.reward, checks=checks)
    decision, test, slices, ni = (
        verdict.decision,
        scored.test,
        scored.slices,
        verdict.noninferiority,
    )
    reasons = verdict.reasons + [  # a check that did not run is said, never silently passed
        f"{c.name} check skipped: {c.detail}" for c in checks if c.status == "skipped"
    ]
    pairs = [
        ItemPair(
            item_id=it.item_id,
            slice=it.slice,
            baseline_answer=b.text,
            candidate_answer=c.text,
            baseline_score=bs,
            candidate_score=cs,
        )
        for it, b, c, bs, cs in zip(items, base, cand, b_scores, c_scores, strict=True)
    ]
    errors = {
        baseline.version: sum(a.error for a in base),
        candidate.version: sum(a.error for a in cand),
    }
    log.info("gate %s vs %s: %s (%s)", candidate.version, baseline.version, decision, reasons[0])
    return GateResult(
        version=candidate.version,
        baseline=baseline.version,
        run_id=run_id or uuid.uuid4().hex,
        decision=decision,
        reasons=reasons,
        test=test,
        slices=slices,
        checks=checks,
        items=pairs,
        errors=errors,
        workload=inputs.workload,
        noninferiority=ni.summary() if ni else None,
        golden_version=inputs.golden_version,
    )


@task(cache_policy=NO_CACHE)
def golden_gate_task(inputs: GateInputs) -> GateResult:
    """Returns the gate's result for the candidate against the baseline on the golden items."""
    return run_gate(inputs)
