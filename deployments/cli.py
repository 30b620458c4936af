"""The ``flywheel`` command: each stage command starts the stage's Prefect flow run (so it
shows in the UI) and prints a short human summary."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NamedTuple

from deployments import commands
from infra.settings import prepare_environment


class Command(NamedTuple):
    name: str
    help: str
    add_args: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace], int]


# ------------------------------------------------------------------- arguments per command


def _no_args(p: argparse.ArgumentParser) -> None:
    pass


def _window_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--window-start", help="ISO hour, e.g. 2026-11-22T10:00:00Z (default: last closed hour)"
    )
    p.add_argument("--hours", type=int, default=1, help="window length in hours (default 1)")


def _curate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--window-start", help="ISO hour (default: last closed hour)")


def _bootstrap_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--force", action="store_true", help="rebuild even if cached")


def _simulate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--requests", type=int, default=500)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gateway-url", help="default: FLYWHEEL_GATEWAY__URL or host:port")


def _forget_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("user_id", help="the raw user id; hashed here, never sent to Prefect")


def _retention_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--days", type=int, help="default: FLYWHEEL_RAW_RETENTION_DAYS")


def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--method",
        choices=["auto", "dpo", "rft", "grpo"],
        default=None,
        help="default: FLYWHEEL_TRAIN__METHOD (auto)",
    )
    p.add_argument("--max-steps", type=int, default=None)


def _release_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("version")
    p.add_argument("--force", action="store_true", help="release a version rejected before")
    p.add_argument("--skip-shadow", action="store_true")


def _control_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reason", default="manual")
    p.add_argument("--actor", default="cli")


def _promote_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reason", default=None, help="why (required with --force; audited)")
    p.add_argument("--actor", default="cli")
    p.add_argument(
        "--force",
        action="store_true",
        help="promote a candidate that has not passed the golden gate (needs --reason)",
    )


def _lineage_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--user", required=True, help="raw user id (hashed locally)")


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cycles", type=int, default=1)
    p.add_argument("--requests", type=int, default=None, help="simulated requests per cycle")
    p.add_argument("--seed", type=int, default=0)


# ------------------------------------------------------------------------ the command table

COMMANDS: tuple[Command, ...] = (
    Command(
        "collect",
        "stage 1: read a window of traces into rollouts/",
        _window_args,
        commands.collect,
    ),
    Command(
        "score",
        "stage 2: composite reward for every trace of a window",
        _window_args,
        commands.score,
    ),
    Command(
        "curate",
        "stage 3: gates, consent, anonymisation, k-anonymity into Iceberg",
        _curate_args,
        commands.curate,
    ),
    Command(
        "bootstrap",
        "build the demo domain's base model v0 locally (cached)",
        _bootstrap_args,
        commands.bootstrap,
    ),
    Command(
        "gateway",
        "serve the OpenAI-compatible gateway (FLYWHEEL_GATEWAY__HOST/PORT)",
        _no_args,
        commands.gateway,
    ),
    Command(
        "simulate",
        "simulated users through the gateway (PII, consent, feedback)",
        _simulate_args,
        commands.simulate,
    ),
    Command(
        "forget-user",
        "erase one user's data everywhere (tables, raw objects, old files)",
        _forget_args,
        commands.forget_user,
    ),
    Command(
        "retention",
        "delete raw traces/rollouts/scores past retention",
        _retention_args,
        commands.retention,
    ),
    Command(
        "train",
        "stage 4: preference pairs -> TRL -> a new model version",
        _train_args,
        commands.train,
    ),
    Command(
        "release",
        "stage 5: gate -> shadow -> canary -> promote / roll back",
        _release_args,
        commands.release,
    ),
    Command(
        "status",
        "the routing state: stable, candidate, phase, weight, history",
        _no_args,
        commands.status,
    ),
    Command(
        "promote",
        "make the candidate the stable version now (it must have passed the gate)",
        _promote_args,
        commands.promote,
    ),
    Command(
        "pause",
        "hold the release where it is (traffic unchanged)",
        _control_args,
        commands.pause,
    ),
    Command(
        "resume",
        "continue a paused or held release",
        _control_args,
        commands.resume,
    ),
    Command(
        "abort",
        "end the release: candidate to 0 %, never released automatically again",
        _control_args,
        commands.abort,
    ),
    Command(
        "rollback",
        "candidate weight and shadow to 0 at once (through the gateway if set)",
        _control_args,
        commands.rollback,
    ),
    Command(
        "lineage",
        "which model versions were trained on this user's data",
        _lineage_args,
        commands.lineage,
    ),
    Command(
        "run",
        "the whole loop once (or --cycles N) on embedded defaults",
        _run_args,
        commands.run,
    ),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flywheel", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for cmd in COMMANDS:
        escaped = cmd.help.replace("%", "%%")  # argparse %-formats help, not descriptions
        cmd.add_args(sub.add_parser(cmd.name, help=escaped, description=cmd.help))
    return parser


def _quiet_libraries() -> None:
    """Library deprecation chatter is for developers, not for someone reading a run summary."""
    import warnings

    for module in ("transformers", "trl", "torch", "peft", "pyiceberg", "datasets", "accelerate"):
        warnings.filterwarnings("ignore", category=FutureWarning, module=module)
        warnings.filterwarnings("ignore", category=UserWarning, module=module)
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=module)


def main(argv: list[str] | None = None) -> int:
    prepare_environment()
    _quiet_libraries()
    ns = build_parser().parse_args(argv)
    handler = {cmd.name: cmd.handler for cmd in COMMANDS}[ns.command]
    try:
        return handler(ns)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - the CLI prints one clear line, not a traceback
        from infra.errors import FlywheelError

        if isinstance(exc, FlywheelError | ValueError):
            print(f"flywheel {ns.command}: error: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
