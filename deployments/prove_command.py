"""``flywheel prove``'s arguments, their check and its run (the handler in
:mod:`deployments.commands` calls :func:`run_prove`)."""

from __future__ import annotations

import argparse
import re
from typing import Any

from deployments.output import emit


def add_args(p: argparse.ArgumentParser) -> None:
    """The arguments of flywheel prove."""
    from deployments.argtypes import whole_number

    p.add_argument("--seeds", type=whole_number(1, 10), default=3, help="seeds per arm (3)")
    p.add_argument(
        "--steps", type=whole_number(1), default=None, help="training steps per arm (200)"
    )
    p.add_argument(
        "--prompts", type=whole_number(20), default=None, help="shared traffic prompts (600)"
    )
    p.add_argument(
        "--workers", type=whole_number(1, 16), default=None, help="trainings at once (2)"
    )
    p.add_argument(
        "--arms",
        default=None,
        help="comma-separated arms (default all: loop,shuffled,rft,grpo,dpo_plain,oracle_sft)",
    )
    p.add_argument(
        "--base",
        default=None,
        metavar="VERSION",
        help="start from this model version in the store (default: the demo's v0, bootstrapped)",
    )
    p.add_argument("--out", default=None, help="report folder (default $FLYWHEEL_HOME/prove)")


def options(ns: argparse.Namespace) -> Any:
    """The ProveOptions the arguments ask for."""
    from flows.prove import ProveOptions

    given = {
        "seeds": ns.seeds,
        "steps": ns.steps,
        "prompts": ns.prompts,
        "workers": ns.workers,
        "out": ns.out,
        "base": ns.base,
        "arms": [a.strip() for a in ns.arms.split(",") if a.strip()] if ns.arms else None,
    }
    return ProveOptions(**{k: v for k, v in given.items() if v is not None})


def check(ns: argparse.Namespace) -> None:
    """Refuse unknown arms (or a set without the loop and its control) and a base version the
    store does not hold before anything runs."""
    from infra.errors import ConfigError
    from tasks.prove.arms import ARMS, CONTROL, LOOP

    if ns.base is not None:
        _check_base(ns.base)
    arms = options(ns).arms
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        raise ConfigError(f"--arms: unknown {', '.join(unknown)} (known: {', '.join(ARMS)})")
    if not {LOOP, CONTROL} <= set(arms):
        raise ConfigError(f"--arms must include {LOOP} and {CONTROL} (the paired test)")


def _check_base(version: str) -> None:
    from infra.errors import ConfigError
    from infra.runtime import Runtime
    from infra.serving import models

    store = Runtime.from_env().store
    if not re.fullmatch(r"v\d+", version) or not models.version_exists(store, version):
        known = ", ".join(models.list_versions(store)) or "none yet (flywheel bootstrap)"
        raise ConfigError(f"--base {version}: no such model version in the store (known: {known})")


def run_prove(ns: argparse.Namespace) -> int:
    """flywheel prove: run the ablation and print its table."""
    from deployments.progress import showing_progress
    from flows.prove import prove as prove_flow
    from infra.settings import get_settings
    from tasks.prove.report import ablation_json, text_table

    with showing_progress():
        ablation = prove_flow(options(ns))
    if ns.json:
        emit(ns, "prove", ablation_json(ablation))
    else:
        print(text_table(ablation))
        out = ns.out or str(get_settings().home_dir / "prove")
        print(f"report: {out}/report.md (chart.png, ablation.json beside it)")
    return 0
