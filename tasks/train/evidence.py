"""What the auto method choice learns from ``flywheel prove``: the stage-4 methods that made
the model worse than its base in the ablation, at a data size like the one at hand.

An arm maps to the method ``auto`` could pick: ``loop`` is ``dpo`` with the SFT term,
``dpo_plain`` is ``dpo`` when ``FLYWHEEL_TRAIN__SFT_WEIGHT`` is 0, ``rft`` and ``grpo`` are
themselves (the shuffled control and the oracle are not methods). The evidence applies when
the run's preference pairs are within a factor of two of the ablation's (``SIZE_FACTOR``):
a method that regressed on 380 pairs says little about 40,000."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
SIZE_FACTOR = 2.0
ABLATION_FILE = "ablation.json"  # under $FLYWHEEL_HOME/prove, written by flywheel prove


def arm_method(arm: str, *, sft_weight: float) -> str | None:
    """The training method an ablation arm stands for (None: none the loop picks)."""
    if arm == "loop":
        return "dpo" if sft_weight > 0 else None
    if arm == "dpo_plain":
        return "dpo" if sft_weight == 0 else None
    return arm if arm in ("rft", "grpo") else None


def regressed_methods(path: Path, *, pairs: int, sft_weight: float) -> dict[str, str]:
    """Method -> why it must not be picked, from the ablation at ``path`` (empty when there is
    none, it is unreadable, or it was measured at another data size)."""
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        measured = int(data["traffic"]["pairs"])
        arms = list(data["arms"])
        base = float(data["base_accuracy"])
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ablation %s not used: %s", path, type(exc).__name__)
        return {}
    if not (measured / SIZE_FACTOR <= pairs <= measured * SIZE_FACTOR):
        return {}
    out: dict[str, str] = {}
    for arm in arms:
        method = arm_method(str(arm.get("arm")), sft_weight=sft_weight)
        if method and arm.get("regressed"):
            mean = float(arm["interval"]["mean"])
            out[method] = (
                f"{arm['arm']} regressed in flywheel prove at {measured} pairs "
                f"(golden {mean:.1%} < base {base:.1%})"
            )
    return out
