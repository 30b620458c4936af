"""One settings object for the whole platform (env prefix ``FLYWHEEL_``, nested with ``__``).

Embedded defaults need no server: everything lives under ``FLYWHEEL_HOME`` (default
``./.flywheel``). Production swaps in S3, a REST catalog, Langfuse, an LLM judge and a
Pushgateway by setting the variables documented in ``.env.example``. Each section's model lives
beside this module, one concept per module.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from infra import OFFLINE_ENV
from infra.errors import ConfigError
from infra.settings.curate import CurateSettings, ReviewSettings
from infra.settings.distil import CostSettings, DistilSettings
from infra.settings.errors import describe_settings_error, describe_validation_error
from infra.settings.gateway import GatewaySettings
from infra.settings.governance import ErasureSettings
from infra.settings.langfuse import LangfuseSettings
from infra.settings.release import ModelServerSettings, ReleaseSettings, default_max_loras
from infra.settings.reward import FeedbackSettings, JudgeSettings, RewardSettings
from infra.settings.store import check_store_url
from infra.settings.train import TrainSettings
from infra.settings.workloads import DEFAULT_WORKLOAD, check_workload_names


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
    bootstrap_cache_dir: Path | None = None  # trained v0 builds by input hash; default: home
    # the workloads (agents, use cases) with release lines of their own (infra.settings.
    # workloads): traffic naming any other is the shared release's. Default: the embedded
    # demo's two agents, which v0 learns and `flywheel run` trains and releases each of;
    # "calculator" alone: one agent, its traffic untagged
    workloads: list[str] = ["calculator", "clock"]
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
    distil: DistilSettings = DistilSettings()
    cost: CostSettings = CostSettings()

    @field_validator("store_url")
    @classmethod
    def _store_url_is_a_path_or_url(cls, value: str | None) -> str | None:
        return None if value is None else check_store_url(value)

    @field_validator("workloads")
    @classmethod
    def _workload_names(cls, value: list[str]) -> list[str]:
        return check_workload_names(value)

    @model_validator(mode="after")
    def _per_workload_settings_name_configured_workloads(self) -> Settings:
        """A verifier, golden set or buffer length of a workload ``workloads`` does not list
        would never apply (its traffic is the shared release's): refused in one line."""
        for variable, named in (
            ("FLYWHEEL_REWARD__VERIFIERS", self.reward.verifiers),
            ("FLYWHEEL_REWARD__GOLDEN_SETS", self.reward.golden_sets),
            ("FLYWHEEL_TRAIN__WORKLOAD_BUFFER_DAYS", self.train.workload_buffer_days),
        ):
            if unknown := sorted(set(named) - {*self.workloads, DEFAULT_WORKLOAD}):
                raise ValueError(
                    f"{variable} names workload {unknown[0]!r}, which FLYWHEEL_WORKLOADS does "
                    f"not list ({', '.join(self.workloads) or 'none'}): add it there or drop it"
                )
        return self

    @model_validator(mode="after")
    def _size_adapter_slots(self) -> Settings:
        """``model_server.max_loras`` unset: sized for the workloads this configuration names
        (:func:`default_max_loras`)."""
        if self.model_server.max_loras is None:
            slots = default_max_loras(len(self.configured_workloads()))
            self.model_server = self.model_server.model_copy(update={"max_loras": slots})
        return self

    def configured_workloads(self) -> list[str]:
        """The workloads with release lines of their own (``FLYWHEEL_WORKLOADS``), sorted."""
        return sorted(self.workloads)

    @property
    def home_dir(self) -> Path:
        """``home`` as an absolute path (``~`` expanded)."""
        return self.home.expanduser().resolve()

    @property
    def resolved_store_url(self) -> str:
        """The object store URL: ``store_url``, else ``<home>/store``."""
        return self.store_url or str(self.home_dir / "store")

    @property
    def resolved_catalog_uri(self) -> str:
        """The Iceberg catalog URI: ``catalog_uri``, else a SQLite file ``<home>/catalog.db``."""
        if self.catalog_uri:
            return self.catalog_uri
        return f"sqlite:///{self.home_dir / 'catalog.db'}"

    @property
    def resolved_warehouse(self) -> str:
        """The Iceberg warehouse: ``catalog_warehouse``, else ``warehouse/`` under the store URL."""
        if self.catalog_warehouse:
            return self.catalog_warehouse
        base = self.resolved_store_url.rstrip("/")
        if "://" in base:
            return f"{base}/warehouse"
        return f"file://{base}/warehouse"

    def model_server_key(self) -> str:
        """The model servers' bearer key: ``FLYWHEEL_MODEL_SERVER__API_KEY``, else one derived
        from the salt (every flywheel process computes the same; the salt is never sent)."""
        if self.model_server.api_key is not None:
            return self.model_server.api_key.get_secret_value()
        return hmac.new(self.salt().encode(), b"flywheel model server", "sha256").hexdigest()

    def salt(self) -> str:
        """The salt for user keys: from settings, else generated once and kept in FLYWHEEL_HOME."""
        if self.user_salt is not None:
            return self.user_salt.get_secret_value()
        path = self.home_dir / "salt"
        if not path.exists():
            _create_secret_file(path, secrets.token_hex(16))
        return path.read_text().strip()


def _create_secret_file(path: Path, value: str) -> None:
    """Write ``value`` to ``path`` readable by its owner alone (0600), create-only: the value is
    written to a private temporary file of its own, then linked into place, so a reader never
    sees a half-written secret and of two processes creating it at once, the first one's value
    stands for both (the second finds the file and reads it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".salt-")  # mode 0600, exclusive
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(value)
        with contextlib.suppress(FileExistsError):  # never replaces a salt in use
            os.link(tmp, path)
    finally:
        os.unlink(tmp)


# variables renamed since: still set, they are refused by name rather than ignored
_RENAMED = {"FLYWHEEL_DEMO_WORKLOADS": "FLYWHEEL_WORKLOADS"}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (call ``get_settings.cache_clear()`` after changing env).

    Raises:
        ConfigError: a variable (in the environment or ``.env``) has a malformed value, or
            an old name; the message names the variable and says what is wrong, in one line.
    """
    for old, new in _RENAMED.items():
        if old in os.environ:  # silently ignored, it would change what runs
            raise ConfigError(f"{old} is now {new}: rename the variable")
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
        # Prefect's own loggers stay quiet on the console (WARNING), but a flow or task run
        # logs at INFO: those records go to the Prefect API, where a run started from the UI,
        # a worker or `deployments.serve` shows them in its Logs tab ("rollback via store:
        # nothing to roll back"); the CLI keeps them off its console (deployments.progress)
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_LOGGING_LOGGERS_PREFECT_FLOW_RUNS_LEVEL": "INFO",
        "PREFECT_LOGGING_LOGGERS_PREFECT_TASK_RUNS_LEVEL": "INFO",
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
