"""The ``flywheel`` command: each stage command starts the stage's Prefect flow run (so it
shows in the UI) and prints a short human summary (``--json`` for scripts).

Bad input (an argument, a setting) is refused here, in one line, before any flow run starts."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import NamedTuple, NoReturn

from deployments import (
    commands,
    erasure_commands,
    output,
    pii_eval_command,
    prove_command,
    review_commands,
)
from deployments.argtypes import whole_number
from infra.errors import ConfigError
from infra.keys import parse_window_start, window_id
from infra.settings import prepare_environment


class Command(NamedTuple):
    name: str
    help: str
    add_args: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace], int]
    starts_flow: bool = True  # a Prefect flow run: the API must be up first
    # validates the request before anything starts (no API, no flow run, no state change)
    check: Callable[[argparse.Namespace], None] | None = None


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error in one line (``flywheel collect: error: ...``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(output.BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# ------------------------------------------------------------- values checked at parse time


def iso_hour(value: str) -> str:
    """A window start: an ISO date-time on the hour, not after the current hour."""
    example = "e.g. 2026-11-22T10:00:00Z"
    try:
        start = parse_window_start(value)
    except ValueError as exc:
        reason = str(exc) if "hour boundary" not in str(exc) else "not on the hour"
        if reason.startswith("Invalid isoformat string"):
            reason = "not an ISO date-time"
        raise argparse.ArgumentTypeError(f"{value!r}: {reason} ({example})") from None
    if start > datetime.now(UTC):
        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        raise argparse.ArgumentTypeError(
            f"{value!r} has not started yet (the current hour is {window_id(hour)})"
        )
    return window_id(start)


def non_empty(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value


# ------------------------------------------------------------------- arguments per command


def _no_args(p: argparse.ArgumentParser) -> None:
    pass


def _window_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--window-start",
        type=iso_hour,
        help="ISO hour, e.g. 2026-11-22T10:00:00Z (default: last closed hour)",
    )
    p.add_argument(
        "--hours",
        type=whole_number(1, 24 * 31),
        default=1,
        help="window length in hours (default 1)",
    )


def _curate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--window-start", type=iso_hour, help="ISO hour (default: last closed hour)")


def _bootstrap_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=whole_number(0), default=0)
    p.add_argument("--force", action="store_true", help="rebuild even if cached")


def _simulate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--requests", type=whole_number(1), default=500)
    p.add_argument("--concurrency", type=whole_number(1, 64), default=8)
    p.add_argument("--seed", type=whole_number(0), default=0)
    p.add_argument("--gateway-url", help="default: FLYWHEEL_GATEWAY__URL or host:port")


def _forget_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "user_id", type=non_empty, help="the raw user id; hashed here, never sent to Prefect"
    )


def _consent_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["grant", "withdraw"])
    p.add_argument(
        "user_id", type=non_empty, help="the raw user id; hashed here, only the key is stored"
    )


def _retention_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--days", type=whole_number(1), help="default: FLYWHEEL_RAW_RETENTION_DAYS")


def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--method",
        choices=["auto", "dpo", "rft", "grpo"],
        default=None,
        help="default: FLYWHEEL_TRAIN__METHOD (auto)",
    )
    p.add_argument("--max-steps", type=whole_number(1), default=None)


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
    p.add_argument("--user", type=non_empty, required=True, help="raw user id (hashed locally)")


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cycles", type=whole_number(1, 20), default=1)
    p.add_argument(
        "--server",
        choices=["local", "vllm"],
        default="local",
        help="local: the demo model in process; vllm: the Llama profile on a local vLLM "
        "(.venv-vllm, `make vllm`), candidates released as LoRA adapters",
    )
    p.add_argument(
        "--requests",
        type=whole_number(10),
        default=None,
        help="simulated requests per cycle (default 500)",
    )
    p.add_argument("--seed", type=whole_number(0), default=0)


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
        starts_flow=False,
    ),
    Command(
        "gateway",
        "serve the OpenAI-compatible gateway (FLYWHEEL_GATEWAY__HOST/PORT)",
        _no_args,
        commands.gateway,
        starts_flow=False,
    ),
    Command(
        "simulate",
        "simulated users through the gateway (PII, consent, feedback)",
        _simulate_args,
        commands.simulate,
        starts_flow=False,
    ),
    Command(
        "forget-user",
        "erase one user's data everywhere (tables, raw objects, old files)",
        _forget_args,
        commands.forget_user,
    ),
    Command(
        "erasure-status",
        "each store and model version an erasure touched, what was done and when",
        erasure_commands.status_args,
        commands.erasure_status,
        starts_flow=False,
    ),
    Command(
        "erasure-resolve",
        "after a failed erasure replacement: --rollback or --accept, with --reason",
        erasure_commands.resolve_args,
        commands.erasure_resolve,
    ),
    Command(
        "consent",
        "record a user's consent to training (grant or withdraw)",
        _consent_args,
        commands.consent,
        starts_flow=False,
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
        check=commands.check_release,
    ),
    Command(
        "status",
        "the routing state: stable, candidate, phase, weight, history",
        _no_args,
        commands.status,
        starts_flow=False,
    ),
    Command(
        "promote",
        "make the candidate the stable version now (it must have passed the gate)",
        _promote_args,
        commands.promote,
        check=commands.check_promote,
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
        check=commands.check_resume,
    ),
    Command(
        "abort",
        "end the release: candidate to 0 %, never released automatically again",
        _control_args,
        commands.abort,
    ),
    Command(
        "rollback",
        "candidate to 0 % at once, or a promotion back to the previous stable while baking",
        _control_args,
        commands.rollback,
    ),
    Command(
        "lineage",
        "which model versions were trained on this user's data",
        _lineage_args,
        commands.lineage,
        starts_flow=False,
    ),
    Command(
        "review",
        "human review: export the queue to a CSV/JSONL file, import the labels",
        review_commands.review_args,
        commands.review,
        starts_flow=False,
        check=review_commands.check_review,
    ),
    Command(
        "pii-eval",
        "the anonymiser on a labelled file: recall per type, leaks, altered texts",
        pii_eval_command.add_args,
        pii_eval_command.run,
        starts_flow=False,
    ),
    Command(
        "run",
        "the whole loop once (or --cycles N) on embedded defaults",
        _run_args,
        commands.run,
        check=commands.check_run,
    ),
    Command(
        "prove",
        "ablation: the loop vs a shuffled reward, RFT, GRPO, plain DPO, oracle SFT",
        prove_command.add_args,
        commands.prove,
        check=prove_command.check,
    ),
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="flywheel", description=__doc__)
    _global_args(parser, default=False)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for cmd in COMMANDS:
        escaped = cmd.help.replace("%", "%%")  # argparse %-formats help, not descriptions
        p = sub.add_parser(cmd.name, help=escaped, description=cmd.help)
        cmd.add_args(p)
        _global_args(p, default=argparse.SUPPRESS)  # also after the command: status --json
    return parser


def _global_args(p: argparse.ArgumentParser, *, default: object) -> None:
    p.add_argument(
        "--json", action="store_true", default=default, help="print the summary as one JSON object"
    )
    p.add_argument(
        "--debug",
        action="store_true",
        default=default,
        help="show tracebacks and Prefect's logs of a failure (also FLYWHEEL_DEBUG=1)",
    )


def _quiet_libraries() -> None:
    """Library deprecation chatter is for developers, not for someone reading a run summary."""
    import warnings

    for module in ("transformers", "trl", "torch", "peft", "pyiceberg", "datasets", "accelerate"):
        warnings.filterwarnings("ignore", category=FutureWarning, module=module)
        warnings.filterwarnings("ignore", category=UserWarning, module=module)
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=module)


def main(argv: list[str] | None = None) -> int:
    try:  # settings first: a malformed variable is named in one line, even for --help
        prepare_environment()
    except (ConfigError, OSError) as exc:  # OSError: FLYWHEEL_HOME cannot be created
        output.error("", str(exc))
        return output.BAD_INPUT
    _quiet_libraries()
    ns = build_parser().parse_args(argv)
    ns.debug = ns.debug or os.environ.get("FLYWHEEL_DEBUG", "") not in ("", "0", "false")
    cmd = {c.name: c for c in COMMANDS}[ns.command]
    try:
        if cmd.check is not None:
            cmd.check(ns)
        if cmd.starts_flow:
            from deployments.progress import ensure_prefect_api, quiet_prefect_console

            if not ns.debug:
                quiet_prefect_console()
            ensure_prefect_api(ns.command)
        return cmd.handler(ns)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - the CLI prints one clear line, not a traceback
        if ns.debug:
            import traceback

            traceback.print_exc()
        output.error(ns.command, output.describe(exc))
        return output.BAD_INPUT if output.is_bad_input(exc) else output.FAILED


if __name__ == "__main__":
    sys.exit(main())
