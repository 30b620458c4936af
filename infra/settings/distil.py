"""Distillation's settings: the student profiles, how a student is trained from a workload's
accepted traffic (``FLYWHEEL_DISTIL__*``), and the serving cost the gateway measures and prices
(``FLYWHEEL_COST__*``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator


class StudentProfile(BaseModel):
    """The shape of a student model: its own base model, smaller than the teacher.

    ``n_inner``: the feed-forward width (None: the architecture's default for ``n_embd``).
    ``share_vocab``: the student uses the teacher's tokenizer (then token-level distillation
    on the teacher's logits applies); else a tokenizer of ``vocab_size`` tokens is trained on
    the training texts and the student learns from the answers alone (SFT).
    ``init``: ``teacher`` copies the teacher's embeddings and evenly spaced layers, cut to the
    student's shape (a head start), ``random`` starts from scratch."""

    n_layer: int = Field(ge=1)
    n_embd: int = Field(ge=8)
    n_head: int = Field(ge=1)
    n_inner: int | None = Field(default=None, ge=8)
    share_vocab: bool = True
    vocab_size: int | None = Field(default=None, ge=32)
    init: Literal["teacher", "random"] = "teacher"

    @model_validator(mode="after")
    def _shape(self) -> StudentProfile:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} is not a multiple of n_head {self.n_head}")
        if not self.share_vocab and self.vocab_size is None:
            raise ValueError("a student with its own vocabulary needs vocab_size")
        return self


# the embedded profiles' students, each under a quarter of its teacher's parameters
# (tests/unit/test_distil.py): the demo GPT-2 (4 x 128, ~822k) becomes 2 x 96 with half
# the feed-forward (~172k, 21 %; depth matters more than width for the carry of an addition);
# the Llama profile (2 x 128) keeps 2 layers at 64 wide with one 64-wide head, what vLLM's
# CPU attention accepts, and a narrow feed-forward (~21 %)
DEFAULT_STUDENTS: dict[str, StudentProfile] = {
    "demo-small": StudentProfile(n_layer=2, n_embd=96, n_head=4, n_inner=192),
    "llama-small": StudentProfile(n_layer=2, n_embd=64, n_head=1, n_inner=64),
}
PROFILE_STUDENT = {"demo": "demo-small", "llama": "llama-small"}


class DistilSettings(BaseModel):
    """``flywheel distil``: a student per workload from its accepted traffic, and the
    non-inferiority release that ships it (``flywheel release V --non-inferior MARGIN``)."""

    # student profiles by name (FLYWHEEL_DISTIL__STUDENTS='{"tiny": {"n_layer": 1, ...}}'
    # replaces the embedded ones); ``student`` picks one (None: the FLYWHEEL_PROFILE's own)
    students: dict[str, StudentProfile] = Field(default_factory=lambda: dict(DEFAULT_STUDENTS))
    student: str | None = None
    # accepted traffic: train-eligible rows of the workload at or above this reward whose
    # judge (the workload's verifier) scored at least min_judge
    min_reward: float = Field(default=0.5, ge=0, le=1)
    min_judge: float = Field(default=1.0, ge=0, le=1)
    min_examples: int = Field(default=50, ge=1)  # fewer accepted rows: nothing is trained
    # training: SFT on the rendered conversation plus KL to the teacher's next-token
    # distribution (kd_weight of the loss, at temperature; 0: SFT only). The accepted answers
    # are the teacher's verified ones, better than its distribution: at 0.5 the demo's
    # student learnt the teacher's mistakes too (calculator, from v0 at 63.7 %: 82.0 % after
    # 600 steps, 86.8 % after 1,500; at 0.2: 97.0 % after 1,000)
    steps: int = Field(default=1000, ge=1)
    batch_size: int = Field(default=32, ge=1)
    learning_rate: float = Field(default=2e-3, gt=0)
    warmup_steps: int = Field(default=20, ge=0)
    kd_weight: float = Field(default=0.2, ge=0, le=1)
    temperature: float = Field(default=2.0, gt=0)
    seed: int = 0
    threads: int | None = None  # torch threads (default: torch's choice)
    # the non-inferiority release: the student may be at most this many points (of the
    # golden score in percent: verified accuracy when every item has a verifier) worse
    margin: float = Field(default=2.0, ge=0, le=100)

    def profile_name(self, profile: str, asked: str | None = None) -> str:
        """The student profile to use: ``asked``, else ``student``, else the embedded
        ``profile``'s (``FLYWHEEL_PROFILE``)."""
        return asked or self.student or PROFILE_STUDENT.get(profile, "demo-small")


class CostSettings(BaseModel):
    """What a request costs: the gateway measures tokens in and out and the model server's
    compute seconds per request for every version; a price per 1,000 tokens (in and out
    alike) turns tokens into money where one is configured."""

    # model version -> price per 1,000 tokens (any currency; shown, never assumed: the
    # release's "cheaper" is the measured compute per request)
    price_per_1k_tokens: dict[str, float] = {}
    default_price_per_1k_tokens: float | None = Field(default=None, ge=0)
    # the window `flywheel status` reads cost over from Prometheus (embedded: since the
    # gateway started)
    window_s: float = Field(default=3600.0, gt=0)
    # the canary's cost guard rail: the candidate's measured compute per request above this
    # multiple of stable's fails the step (a non-inferiority release always sets it)
    ratio_max: float = Field(default=1.0, gt=0)

    def price(self, version: str) -> float | None:
        """The configured price per 1,000 tokens of ``version`` (None: none configured)."""
        return self.price_per_1k_tokens.get(version, self.default_price_per_1k_tokens)
