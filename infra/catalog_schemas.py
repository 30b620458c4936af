"""The tables' schemas (namespace ``flywheel``; docs/reference/storage.md) and their day
partitions: what every Iceberg table holds, apart from how it is opened and written
(:mod:`infra.catalog`)."""

from __future__ import annotations

import pyarrow as pa

NAMESPACE = "flywheel"
TS = pa.timestamp("us", tz="UTC")
STR_LIST = pa.list_(pa.string())

SCHEMAS: dict[str, pa.Schema] = {
    "training_examples": pa.schema(
        [
            ("trace_id", pa.string()),
            ("prompt_group", pa.string()),
            ("user_key", pa.string()),
            ("question", pa.string()),
            ("contexts", STR_LIST),
            ("answer", pa.string()),
            ("reward", pa.float64()),
            ("reward_judge", pa.float64()),
            ("reward_faithfulness", pa.float64()),
            ("reward_context_recall", pa.float64()),
            ("reward_feedback", pa.float64()),
            ("reward_latency", pa.float64()),
            ("reward_config_hash", pa.string()),
            ("model_version", pa.string()),
            ("pattern", pa.string()),
            ("pii_entities", STR_LIST),
            # "train": passed every gate; "rejected_only": kept solely as the low-reward side of a
            # preference pair for its prompt group (never used as an SFT/RFT target).
            ("eligible_as", pa.string()),
            ("window", pa.string()),
            ("created_at", TS),
            # added by issue 15 (schema evolution: older tables get them on first load, their
            # old rows read as null): the agent use case and the anonymised conversation
            ("workload", pa.string()),
            ("messages", pa.string()),  # JSON list of OpenAI chat messages
        ]
    ),
    "preference_pairs": pa.schema(
        [
            ("pair_id", pa.string()),
            ("prompt_group", pa.string()),
            ("prompt", pa.string()),
            ("chosen", pa.string()),
            ("rejected", pa.string()),
            ("chosen_reward", pa.float64()),
            ("rejected_reward", pa.float64()),
            ("reward_diff", pa.float64()),
            ("windows", STR_LIST),
            ("user_keys", STR_LIST),
            ("train_run", pa.string()),
            ("created_at", TS),
        ]
    ),
    "eval_results": pa.schema(
        [
            ("run_id", pa.string()),
            ("model_version", pa.string()),
            ("item_id", pa.string()),
            ("slice", pa.string()),
            ("score", pa.float64()),
            ("answer", pa.string()),
            ("created_at", TS),
        ]
    ),
    "audit_log": pa.schema(
        [
            ("event_id", pa.string()),
            ("at", TS),
            ("event_type", pa.string()),
            ("actor", pa.string()),
            ("subject", pa.string()),
            ("details", pa.string()),
        ]
    ),
    "quarantine": pa.schema(
        [
            ("stage", pa.string()),
            ("window", pa.string()),
            ("reason", pa.string()),
            ("record", pa.string()),
            ("at", TS),
        ]
    ),
    # human review (tasks/review.py): curate queues anonymised rows, people label them
    "review_queue": pa.schema(
        [
            ("trace_id", pa.string()),
            ("window", pa.string()),
            ("reason", pa.string()),  # random | edge
            ("reward", pa.float64()),
            ("reward_feedback", pa.float64()),
            ("question", pa.string()),
            ("answer", pa.string()),
            ("model_version", pa.string()),
            ("queued_at", TS),
            ("human_score", pa.float64()),  # 0..1; null until labelled
            ("reviewer", pa.string()),  # a pseudonym, never a name or e-mail
            ("labelled_at", TS),
        ]
    ),
    # offline-online agreement (tasks/release/gate/agreement.py): one row per release that reached
    # the canary and workload, the gate's estimate beside what the canary measured
    "release_outcomes": pa.schema(
        [
            ("release_id", pa.string()),
            ("workload", pa.string()),
            ("version", pa.string()),
            ("baseline", pa.string()),
            ("gate_decision", pa.string()),
            ("outcome", pa.string()),  # promoted | rolled_back | held | interrupted
            ("golden_version", pa.string()),
            ("golden_items", pa.int64()),
            ("offline_reward_diff", pa.float64()),
            ("offline_reward_low", pa.float64()),
            ("offline_reward_high", pa.float64()),
            ("offline_p", pa.float64()),
            ("offline_gain", pa.bool_()),
            ("golden_accuracy_baseline", pa.float64()),
            ("golden_accuracy_candidate", pa.float64()),
            ("golden_accuracy_diff", pa.float64()),
            ("golden_accuracy_low", pa.float64()),
            ("golden_accuracy_high", pa.float64()),
            ("canary_start", TS),
            ("canary_end", TS),
            ("requests_candidate", pa.float64()),
            ("requests_stable", pa.float64()),
            ("error_share_candidate", pa.float64()),
            ("error_share_stable", pa.float64()),
            ("online_error_diff", pa.float64()),
            ("online_error_low", pa.float64()),
            ("online_error_high", pa.float64()),
            ("voters_candidate", pa.float64()),
            ("voters_stable", pa.float64()),
            ("feedback_candidate", pa.float64()),
            ("feedback_stable", pa.float64()),
            ("online_feedback_diff", pa.float64()),
            ("online_feedback_low", pa.float64()),
            ("online_feedback_high", pa.float64()),
            ("verifier_scored_candidate", pa.int64()),  # null until the canary is scored
            ("verifier_scored_stable", pa.int64()),
            ("verifier_pass_candidate", pa.float64()),
            ("verifier_pass_stable", pa.float64()),
            ("online_verifier_diff", pa.float64()),
            ("online_verifier_low", pa.float64()),
            ("online_verifier_high", pa.float64()),
            ("online_worse", pa.bool_()),
            ("contradicts", pa.bool_()),
            ("created_at", TS),
        ]
    ),
    # a golden set that follows traffic (tasks/golden_proposals.py): proposed items from
    # curated (anonymised) traffic and a person's decision on each
    "golden_proposals": pa.schema(
        [
            ("proposal_id", pa.string()),
            ("workload", pa.string()),
            ("question", pa.string()),
            ("reference", pa.string()),
            ("reason", pa.string()),
            ("cluster", pa.int64()),
            ("source_trace", pa.string()),  # the reference's trace
            ("question_trace", pa.string()),  # the trace whose question it is
            ("contexts", STR_LIST),
            ("messages", pa.string()),  # JSON: the anonymised conversation
            ("golden_version", pa.string()),  # proposed against
            ("status", pa.string()),  # pending | accepted | edited | rejected
            ("proposed_at", TS),
            ("reviewer", pa.string()),  # a pseudonym, never a name or e-mail
            ("decided_at", TS),
            ("new_version", pa.string()),  # the golden version it entered
        ]
    ),
    "consent": pa.schema(
        [
            ("user_key", pa.string()),
            ("consent_to_training", pa.bool_()),
            ("updated_at", TS),
        ]
    ),
}

# table -> (source column, partition name) for a day partition
DAY_PARTITIONS: dict[str, tuple[str, str]] = {
    "training_examples": ("created_at", "created_day"),
    "audit_log": ("at", "at_day"),
}
