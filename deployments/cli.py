"""The flywheel command: each stage command starts the stage's Prefect flow run (so it
shows in the UI) and prints a short human summary (--json for scripts).

Bad input (an argument, a setting) is refused here, in one line, before any flow run starts."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import NamedTuple, NoReturn

from deployments import (
    arguments,
    commands,
    erasure_commands,
    golden_commands,
    governance_commands,
    keys_commands,
    output,
    pii_eval_command,
    prove_command,
    release_commands,
    review_commands,
)
from infra.errors import ConfigError
from infra.settings import prepare_environment


class Command(NamedTuple):
    """One row of the command table: name, help, arguments, handler, and checks."""

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
        """Exit 2 with the usage error in one line."""
        self.exit(output.BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# ------------------------------------------------------------------------ the command table

COMMANDS: tuple[Command, ...] = (
    Command(
        "collect",
        "stage 1: read a window of traces into rollouts/",
        arguments.window_args,
        commands.collect,
    ),
    Command(
        "score",
        "stage 2: composite reward for every trace of a window",
        arguments.window_args,
        commands.score,
    ),
    Command(
        "curate",
        "stage 3: gates, consent, anonymisation, k-anonymity into Iceberg",
        arguments.curate_args,
        commands.curate,
    ),
    Command(
        "bootstrap",
        "build the demo domain's base model v0 locally (cached)",
        arguments.bootstrap_args,
        commands.bootstrap,
        starts_flow=False,
    ),
    Command(
        "gateway",
        "serve the OpenAI-compatible gateway (FLYWHEEL_GATEWAY__HOST/PORT)",
        arguments.no_args,
        commands.gateway,
        starts_flow=False,
    ),
    Command(
        "simulate",
        "simulated users through the gateway (PII, consent, feedback)",
        arguments.simulate_args,
        commands.simulate,
        starts_flow=False,
    ),
    Command(
        "forget-user",
        "erase one user's data everywhere (tables, raw objects, old files)",
        arguments.forget_args,
        governance_commands.forget_user,
    ),
    Command(
        "erasure-status",
        "each store and model version an erasure touched, what was done and when",
        erasure_commands.status_args,
        governance_commands.erasure_status,
        starts_flow=False,
    ),
    Command(
        "erasure-resolve",
        "after a failed erasure replacement: --rollback or --accept, with --reason",
        erasure_commands.resolve_args,
        governance_commands.erasure_resolve,
    ),
    Command(
        "consent",
        "record a user's consent to training (grant or withdraw)",
        arguments.consent_args,
        governance_commands.consent,
        starts_flow=False,
    ),
    Command(
        "keys",
        "the gateway's client API keys: create (shown once), list, revoke",
        arguments.keys_args,
        keys_commands.keys,
        starts_flow=False,
    ),
    Command(
        "retention",
        "delete raw traces/rollouts/scores past retention",
        arguments.retention_args,
        governance_commands.retention,
    ),
    Command(
        "train",
        "stage 4: preference pairs -> TRL -> a new model version",
        arguments.train_args,
        commands.train,
    ),
    Command(
        "distil",
        "a smaller student of a workload's stable version, from its accepted traffic",
        arguments.distil_args,
        commands.distil,
    ),
    Command(
        "release",
        "stage 5: gate -> shadow -> canary -> promote / roll back",
        arguments.release_args,
        commands.release,
        check=commands.check_release,
    ),
    Command(
        "status",
        "the routing state: stable, candidate, phase, weight, history",
        arguments.no_args,
        release_commands.status,
        starts_flow=False,
    ),
    Command(
        "promote",
        "make the candidate the stable version now (it must have passed the gate)",
        arguments.promote_args,
        release_commands.promote,
        check=release_commands.check_promote,
    ),
    Command(
        "pause",
        "hold the release where it is (traffic unchanged)",
        arguments.control_args,
        release_commands.pause,
    ),
    Command(
        "resume",
        "continue a paused or held release",
        arguments.control_args,
        release_commands.resume,
        check=release_commands.check_resume,
    ),
    Command(
        "abort",
        "end the release: candidate to 0 %, never released automatically again",
        arguments.control_args,
        release_commands.abort,
    ),
    Command(
        "rollback",
        "candidate to 0 % at once, or a promotion back to the previous stable while baking",
        arguments.control_args,
        release_commands.rollback,
    ),
    Command(
        "report",
        "a version's last golden-gate report, or agreement: each release's gate vs its canary",
        arguments.report_args,
        release_commands.report,
        starts_flow=False,
    ),
    Command(
        "lineage",
        "which model versions were trained on this user's data",
        arguments.lineage_args,
        governance_commands.lineage,
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
        "golden",
        "propose golden items from traffic the set does not cover; review them into a version",
        golden_commands.golden_args,
        commands.golden,
        starts_flow=False,
        check=golden_commands.check_golden,
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
        arguments.run_args,
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
    """The flywheel parser: one subcommand per row of the command table."""
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
    """Run one flywheel command; returns the exit code."""
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
