"""Stage 5's settings: the gate, the shadow phase and the canary steps
(``FLYWHEEL_RELEASE__*``), and the model server the release loads candidates into
(``FLYWHEEL_MODEL_SERVER__*``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr


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
    # the share of alpha the shadow phase spends on "worse than stable" (one-sided); the
    # canary spends the rest: an identical version is rolled back at most alpha of the time
    # by shadow and canary together (tasks/release/canary/sequential.py, release_alpha_split)
    shadow_alpha_share: float = Field(default=0.2, gt=0, lt=1)
    min_shadow_pairs: int = Field(default=30, ge=2)
    # canary steps (stable's p99 counts as at least 50 ms, its error rate as at least
    # error_floor: only a stable without errors needs a floor, and 1 % hid a 3x regression
    # from 0.3 %; the significance test, not the floor, keeps chance out)
    canary_steps: tuple[int, ...] = (5, 25, 50, 100)
    # % of users kept on stable at the step that would send 100 %, until the decision: the
    # last comparison stays concurrent (promotion then routes everyone)
    stable_holdback: float = Field(default=10.0, gt=0, lt=100)
    analysis_interval_s: float = Field(default=300.0, gt=0)
    step_deadline_s: float = Field(default=1800.0, gt=0)
    min_requests_per_step: int = Field(default=50, ge=1)
    # distinct users (voices) each of stable and the candidate must have served in a step
    # before it is judged: fewer is no comparison, so the step waits, then holds (never
    # passes). 10: with 10 users a side, 7 of the candidate's meeting errors against none of
    # stable's is significant at the canary's per-test level (p 0.0015 < 0.05 / 20); below 6 a
    # side not even all of them would be (1 / C(10, 5) = 0.004)
    min_users_per_step: int = Field(default=10, ge=1)
    # sample ratio mismatch: a pass needs each side's distinct users in the step to match the
    # step's weight (chi-square, one degree of freedom) at this level; below it the step holds
    # (waits, then held for a person): the split itself is broken (a client that picks its
    # version, a bucket that leaks, a crash that drops one side's users), so no comparison on it
    # can be trusted. 0.001, as experimentation platforms use; 0 turns the check off
    srm_alpha: float = Field(default=0.001, ge=0, lt=1)
    error_ratio_max: float = 1.5
    latency_p99_ratio_max: float = 1.5
    feedback_ratio_min: float = 0.8
    min_feedback: int = 20
    error_floor: float = 0.001
    latency_floor_s: float = 0.05
    no_data_action: Literal["hold", "rollback"] = "hold"  # hold: weight 0, held for a person
    # always-valid sequential test of each canary step (tasks/release/canary/sequential.py): None
    # judges a step at its horizon by the guard rails above only
    sequential_alpha: float | None = Field(default=0.05, gt=0, lt=1)
    sequential_min_requests: int = Field(default=10, ge=1)  # before the first sequential look
    # the cost rail (a non-inferiority release sets it, FLYWHEEL_COST__RATIO_MAX): the
    # candidate's measured compute per request above this multiple of stable's fails a step
    cost_ratio_max: float | None = Field(default=None, gt=0)
    # a non-inferiority release's margin in points (it sets it): the shadow phase then rolls
    # back only a candidate significantly worse than stable by more than the margin
    noninferiority_margin: float | None = Field(default=None, ge=0)
    pii_leak_check: bool = True  # candidate answers with identifiers not in the prompt fail
    # how the phases wait
    max_poll_s: float = 5.0
    pause_timeout_s: float | None = None  # default: step_deadline_s
    prometheus_url: str | None = None

    def canary_weight(self, step: int) -> float:
        """The candidate's share of users at canary step ``step``: ``canary_steps[step]``, never
        more than ``100 - stable_holdback``."""
        return min(float(self.canary_steps[step]), 100.0 - self.stable_holdback)

    @property
    def poll_s(self) -> float:
        """How often a phase looks at the state and the metrics: several times per interval."""
        return min(self.max_poll_s, max(0.05, self.analysis_interval_s / 4))

    @property
    def pause_limit_s(self) -> float:
        """How long a running release waits for a paused one to be resumed."""
        return self.pause_timeout_s if self.pause_timeout_s is not None else self.step_deadline_s


class ModelServerSettings(BaseModel):
    """The model server the release drives (vLLM with ``--enable-lora``): candidates are loaded
    into it as LoRA adapters named after their version, and the gateway sends every version that
    has no upstream of its own to it (the base model is served as ``base_version``)."""

    kind: Literal["none", "vllm"] = "none"
    urls: list[str] = []  # replica base URLs (http://host:port), loaded and unloaded together
    base_version: str = "v0"  # vLLM --served-model-name of the base model
    # servers of other base models (a distilled student is a base of its own): base version ->
    # replica URLs, run by the operator; `flywheel run --server vllm` starts its own
    bases: dict[str, list[str]] = {}
    adapter_dir: Path | None = None  # where adapters from S3 are synced (default: model cache)
    server_path: str | None = None  # adapter_dir (or the local store) as the server sees it
    bake_s: float = Field(default=600.0, ge=0)  # old stable stays loaded after a promotion
    timeout_s: float = Field(default=120.0, gt=0)
    # adapters one server holds (vLLM --max-loras): None sizes it from the workloads the
    # configuration names (Settings fills it in, see default_max_loras)
    max_loras: int | None = Field(default=None, ge=1)
    max_lora_rank: int = Field(default=16, ge=1)  # vLLM --max-lora-rank
    # the bearer key every model server is started with (vLLM --api-key) and called with;
    # unset: one derived from the user salt (Settings.model_server_key), which the servers
    # `flywheel run --server vllm` starts use
    api_key: SecretStr | None = None

    @property
    def enabled(self) -> bool:
        """Whether a model server is configured (a kind other than ``none`` and at least one
        URL)."""
        return self.kind != "none" and bool(self.urls)


def default_max_loras(workloads: int) -> int:
    """Adapters a server must hold for ``workloads`` workloads with releases of their own
    beside the shared one: each release line's stable and candidate, plus one former stable
    kept loaded during its bake time: ``2 * (workloads + 1) + 1``."""
    return 2 * (workloads + 1) + 1
