"""The per-run knobs of a release (:class:`ReleaseOptions`, the ``release`` flow's form)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field, field_validator

from infra.settings.workloads import WORKLOAD_PATTERN

if TYPE_CHECKING:
    from infra.routing import RoutingState
    from infra.settings import ReleaseSettings

CONTINUED = ("shadow", "canary", "held")  # phases a release run continues (or waits in)
POLICY_FIELDS = {
    "shadow_fraction",
    "canary_steps",
    "analysis_interval_s",
    "step_deadline_s",
    "min_requests_per_step",
    "min_users_per_step",
    "min_shadow_pairs",
    "no_data_action",
    "embeddings",
}


class ReleaseOptions(BaseModel):
    """Per-run knobs of a release; the policy fields left unset come from settings
    (FLYWHEEL_RELEASE__*)."""

    workload: str | None = Field(
        default=None,
        pattern=WORKLOAD_PATTERN,  # the run's body checks that it is configured
        description="release for this workload alone (default: the shared release)",
    )
    baseline: str | None = Field(
        default=None, description="version to beat (default: the stable one)"
    )
    force: bool = Field(default=False, description="release a version that was rejected before")
    skip_shadow: bool = Field(default=False, description="go from the gate straight to canary")
    golden_path: str | None = Field(
        default=None,
        description="golden jsonl file or folder (default: the workload's golden set, else "
        "FLYWHEEL_REWARD__GOLDEN)",
    )
    max_golden_items: int | None = Field(
        default=None, ge=1, description="gate on the first N golden items only (default: all)"
    )
    gateway_url: str | None = Field(
        default=None,
        description="the gateway whose admin listener canary metrics are read from (default: "
        "FLYWHEEL_GATEWAY__URL)",
    )
    admin_url: str | None = Field(
        default=None,
        description="its admin listener, when not at gateway_url's host and "
        "FLYWHEEL_GATEWAY__ADMIN_PORT (default: FLYWHEEL_GATEWAY__ADMIN_URL)",
    )
    actor: str = Field(default="release-flow", description="who is recorded in the audit log")
    # overrides of ReleaseSettings for this run (empty: FLYWHEEL_RELEASE__<NAME>)
    shadow_fraction: float | None = Field(
        default=None, ge=0, le=1, description="share of requests copied to the candidate"
    )
    canary_steps: list[int] | None = Field(
        default=None, description="candidate's share of traffic (%) at each canary step"
    )
    analysis_interval_s: float | None = Field(
        default=None, gt=0, description="seconds each step runs before its verdict"
    )
    step_deadline_s: float | None = Field(
        default=None, gt=0, description="seconds a step may wait for enough traffic"
    )
    min_requests_per_step: int | None = Field(
        default=None, ge=1, description="candidate requests a canary step needs"
    )
    min_users_per_step: int | None = Field(
        default=None, ge=1, description="users each of stable and the candidate serve in a step"
    )
    min_shadow_pairs: int | None = Field(
        default=None, ge=2, description="scored shadow pairs the shadow phase needs"
    )
    no_data_action: Literal["hold", "rollback"] | None = Field(
        default=None, description="what a step without enough traffic by its deadline does"
    )
    embeddings: bool | None = Field(
        default=None, description="also compare answer embeddings (MiniLM)"
    )
    non_inferior: bool = Field(
        default=False,
        description="a cheaper model (a distilled student): gate on no worse than stable by "
        "more than the margin, and cheaper, instead of better; the canary adds a cost rail",
    )
    margin: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description="non-inferiority margin in points (default: FLYWHEEL_DISTIL__MARGIN)",
    )
    cheaper: bool = Field(
        default=True,
        description="a non-inferiority release must also be cheaper, at the gate and in the "
        "canary (off: an erasure's replacement of a student, of the same shape)",
    )

    @field_validator("canary_steps")
    @classmethod
    def _percentages(cls, steps: list[int] | None) -> list[int] | None:
        if steps is not None and (not steps or any(not 0 < w <= 100 for w in steps)):
            raise ValueError("canary steps are percentages of traffic in (0, 100]")
        return steps

    def policy(
        self, release: ReleaseSettings, cost_ratio_max: float = 1.0, *, margin: float = 2.0
    ) -> ReleaseSettings:
        """``release`` with this run's overrides applied (a non-inferiority release: its margin,
        this run's or ``margin``, carried into the shadow phase, and the canary's cost rail at
        ``cost_ratio_max``)."""
        update = self.model_dump(include=POLICY_FIELDS, exclude_none=True)
        if "canary_steps" in update:
            update["canary_steps"] = tuple(update["canary_steps"])
        if self.non_inferior:
            update["noninferiority_margin"] = self.gate_margin(margin)
        if self.non_inferior and self.cheaper:
            update["cost_ratio_max"] = cost_ratio_max
        return release.model_copy(update=update)

    def gate_margin(self, default: float) -> float | None:
        """The non-inferiority margin in points (``default``: the settings'), None for a
        release that must be better."""
        if not self.non_inferior:
            return None
        return self.margin if self.margin is not None else default


def continued_options(opts: ReleaseOptions, state: RoutingState, version: str) -> ReleaseOptions:
    """``opts`` for a run that continues ``version``'s release in ``state`` (resumed, or run
    again): a non-inferiority release stays one, with the margin and the "cheaper" requirement
    its gate recorded, though the person resuming it names neither (``flywheel resume``)."""
    if opts.non_inferior or state.candidate != version or state.phase not in CONTINUED:
        return opts
    for entry in reversed(state.history):
        recorded = (entry.evidence.get("gate") or {}).get("noninferiority")
        if recorded:
            return opts.model_copy(
                update={
                    "non_inferior": True,
                    "margin": recorded["test"]["margin"],
                    "cheaper": recorded.get("cheaper_required", True),
                }
            )
        if entry.to_phase == "gating":  # the start of this release: its gate is not one
            break
    return opts
