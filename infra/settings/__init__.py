"""One settings object for the whole platform (env prefix ``FLYWHEEL_``, nested with ``__``):
``from infra.settings import Settings, get_settings`` and any section's model.

The root object and how it is loaded live in ``root``; each section in the module of its
concept (``store``, ``langfuse``, ``reward``, ``curate``, ``train``, ``release``, ``gateway``,
``governance``); ``errors`` turns a malformed variable into one line naming it.
"""

from __future__ import annotations

from infra.settings.curate import CurateSettings, ReviewSettings
from infra.settings.distil import CostSettings, DistilSettings, StudentProfile
from infra.settings.gateway import GatewaySettings, UpstreamSettings
from infra.settings.governance import ErasureSettings
from infra.settings.langfuse import LangfuseSettings
from infra.settings.release import ModelServerSettings, ReleaseSettings
from infra.settings.reward import (
    COMPONENT_NAMES,
    FeedbackSettings,
    JudgeSettings,
    RewardSettings,
    check_verifier_spec,
)
from infra.settings.root import Settings, get_settings, prepare_environment
from infra.settings.store import check_store_url
from infra.settings.train import TrainSettings

__all__ = [
    "COMPONENT_NAMES",
    "CostSettings",
    "CurateSettings",
    "DistilSettings",
    "ErasureSettings",
    "FeedbackSettings",
    "GatewaySettings",
    "JudgeSettings",
    "LangfuseSettings",
    "ModelServerSettings",
    "ReleaseSettings",
    "ReviewSettings",
    "RewardSettings",
    "Settings",
    "StudentProfile",
    "TrainSettings",
    "UpstreamSettings",
    "check_store_url",
    "check_verifier_spec",
    "get_settings",
    "prepare_environment",
]
