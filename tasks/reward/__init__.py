"""The composite reward and its judges: one definition for stage 2 (every trace), the release
gate (golden items) and shadow, so a model is judged the same way in every place.

- ``judge``: the demo domain's programmatic verifier, or an LLM rubric (:mod:`.judges`);
- ``faithfulness`` and ``context_recall``: ragas or non-LLM equivalents (:mod:`.context`);
- ``feedback``: the user's thumbs; ``latency``: the seed's penalty past ``latency_ok_s``
  (:mod:`.components`, which also combines them and hashes the configuration);
- plug-in verifiers (RLVR, :mod:`.verifiers`) give the judge component per workload;
- :mod:`.scorer` scores answers with all of them, reusing :mod:`.cache` shards.
"""

from tasks.reward.cache import CACHE_SCHEMA, ComponentCache, load_cache, save_cache
from tasks.reward.components import (
    CACHED,
    COMPONENTS,
    REWARD_VERSION,
    RewardBreakdown,
    RewardColumns,
    RewardValues,
    cache_namespace,
    combine,
    content_key,
    feedback_component,
    latency_component,
    resolve_ragas_mode,
    reward_config_hash,
    unmet_requirements,
    weights,
)
from tasks.reward.context import ContextMetrics, support
from tasks.reward.items import ScoreItem, ScoreStats
from tasks.reward.judges import (
    RUBRIC_VERSION,
    Judge,
    LLMJudge,
    Rubric,
    build_judge,
    judge_id,
    rubric_score,
)
from tasks.reward.scorer import (
    Scorer,
    ascore_batch,
    run_sync,
    score_answer,
    score_batch,
)
from tasks.reward.verifiers import (
    PluginVerifier,
    Verdict,
    VerifierTrace,
    load_verifier,
    verifier_for,
    verifier_spec,
)

__all__ = [
    "CACHED",
    "CACHE_SCHEMA",
    "COMPONENTS",
    "REWARD_VERSION",
    "RUBRIC_VERSION",
    "ComponentCache",
    "ContextMetrics",
    "Judge",
    "LLMJudge",
    "PluginVerifier",
    "RewardBreakdown",
    "RewardColumns",
    "RewardValues",
    "Rubric",
    "ScoreItem",
    "ScoreStats",
    "Scorer",
    "Verdict",
    "VerifierTrace",
    "ascore_batch",
    "build_judge",
    "cache_namespace",
    "combine",
    "content_key",
    "feedback_component",
    "judge_id",
    "latency_component",
    "load_cache",
    "load_verifier",
    "resolve_ragas_mode",
    "reward_config_hash",
    "rubric_score",
    "run_sync",
    "save_cache",
    "score_answer",
    "score_batch",
    "support",
    "unmet_requirements",
    "verifier_for",
    "verifier_spec",
    "weights",
]
