"""The trainer on its own, for GPUs: the ``train`` flow's data selection, training under
``accelerate launch`` (one or several GPUs, or the CPU), and publication with lineage, in three
steps sharing a run directory::

    python -m deployments.train_recipe select --run /scratch/r1 [--base-version v3] \
        [--method auto] [--workload W]
    accelerate launch --num_processes 8 -m deployments.train_recipe train --run /scratch/r1 \
        [--use-lora | --no-use-lora] [--max-steps 500] [--batch-size 4]
    python -m deployments.train_recipe publish --run /scratch/r1

``select`` reads the rolling buffer at one snapshot through the flow's own selection
(``tasks.train.plan.plan_training``: the same settings, renderer, golden decontamination and
method choice; ``--workload W``: W's rows only, from W's stable version, as ``flywheel train
--workload W``) and writes ``selection.json`` (datetimes as
ISO strings, restored on read) and ``run.json``; ``train`` trains from the base version into
``model/`` (rank 0 saves) and writes ``outcome.json``; ``publish`` records the pairs, runs
the golden evaluation, and publishes ``models/<next version>/`` with ``lineage.json`` and the
model card, as the flow would. Settings come from the environment (``FLYWHEEL_*``) as for
the flow; ``train`` options override ``FLYWHEEL_TRAIN__*`` for this run. The steps
themselves: :mod:`tasks.train.recipe`.
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import fields
from pathlib import Path

from tasks.train.config import TrainConfig
from tasks.train.recipe import publish, select, train


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m deployments.train_recipe", description=__doc__)
    steps = parser.add_subparsers(dest="step", required=True)
    sel = steps.add_parser("select", help="the flow's data selection into the run directory")
    sel.add_argument("--run", required=True, type=Path)
    sel.add_argument("--base-version")
    sel.add_argument("--method", choices=["auto", "dpo", "rft", "grpo"])
    sel.add_argument("--workload", help="this workload's rows only (default: every workload)")
    tr = steps.add_parser("train", help="train (under accelerate launch)")
    tr.add_argument("--run", required=True, type=Path)
    tr.add_argument("--method", choices=["dpo", "rft", "grpo"])
    kinds = {"int": int, "float": float, "str": str}
    for f in fields(TrainConfig):
        flag = f"--{f.name.replace('_', '-')}"
        if f.name == "method":
            continue
        if str(f.type) == "bool":
            tr.add_argument(flag, action=argparse.BooleanOptionalAction, default=None)
        elif str(f.type) in kinds:
            tr.add_argument(flag, type=kinds[str(f.type)])
    tr.add_argument("--lora-output", choices=["adapter", "merged"])
    pub = steps.add_parser("publish", help="golden evaluation, lineage, publication")
    pub.add_argument("--run", required=True, type=Path)
    return parser


def main(argv: list[str] | None = None) -> None:
    """python -m deployments.train_recipe select|train|publish."""
    opts = vars(_parser().parse_args(argv))
    step, run = opts.pop("step"), opts.pop("run")
    if step == "select":
        info = select(
            run, base_version=opts["base_version"], method=opts["method"], workload=opts["workload"]
        )
        print(json.dumps({"run": str(run), **info["choice"]}, default=str))
    elif step == "train":
        record = train(run, {k: v for k, v in opts.items() if v is not None})
        if record is not None:
            print(json.dumps({"steps": record["steps"], "metrics": record["metrics"]}))
    else:
        print(json.dumps({"version": publish(run)}))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, force=True)
    main()
